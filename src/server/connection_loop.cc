// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/connection_loop.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/log.h"
#include "transport/factory.h"

namespace optcast::server {

ConnectionLoop::ConnectionLoop(const ServerOptions& opts, ServerMetrics& metrics, Events& events)
    : opts_(opts), metrics_(metrics), events_(events) {}

ConnectionLoop::~ConnectionLoop() { DestroyAll(); }

void ConnectionLoop::DestroyAll() {
  for (auto& [cs, owned] : conns_) owned.reset();
  conns_.clear();
}

Status ConnectionLoop::Listen() {
  OPTCAST_RETURN_IF_ERROR(transport::Listen(opts_.transport, opts_.listen, &listener_));
  port_ = listener_->port();
  OPTCAST_RETURN_IF_ERROR(poller_.Add(listener_->fd(), listener_.get(), true, false));
  return Open();
}

Status ConnectionLoop::Open() { return poller_.Add(waker_.fd(), &waker_, true, false); }

std::string ConnectionLoop::TransportName() const { return listener_ ? listener_->Describe() : "no listener"; }

Status ConnectionLoop::Watch(int fd, void* tag) {
  OPTCAST_RETURN_IF_ERROR(poller_.Add(fd, tag, true, false));
  watched_.push_back(tag);
  return Status::Ok();
}

Status ConnectionLoop::Poll(int timeout_ms) {
  OPTCAST_RETURN_IF_ERROR(poller_.Wait(timeout_ms, &events_scratch_));
  for (const auto& ev : events_scratch_) {
    if (listener_ && ev.tag == listener_.get()) {
      AcceptAll();
    } else if (ev.tag == &waker_) {
      waker_.Drain();
    } else if (std::find(watched_.begin(), watched_.end(), ev.tag) != watched_.end()) {
      events_.OnWatched(ev.tag);
    } else {
      auto* cs = static_cast<ConnState*>(ev.tag);
      if (cs->dead) continue;
      if (ev.readable && cs->closing) {
        // Lingering close: a peer still sending must not get a reset that would throw away the
        // error message waiting in its receive queue.
        if (!cs->conn->DiscardAvailable()) cs->dead = true;
      } else if (ev.readable && cs->want_read) {
        if (!HandleReadable(cs)) continue;
      }
      if ((ev.writable || cs->conn->WritesSignalReadable()) && !cs->dead) MarkDirty(cs);
      if (ev.hangup && !ev.readable && !cs->dead && !cs->closing) {
        events_.OnConnectionLost(cs, UnavailableError("connection reset by " + cs->conn->peer()));
      }
    }
  }
  return Status::Ok();
}

void ConnectionLoop::AcceptAll() {
  for (;;) {
    std::unique_ptr<transport::Connection> conn;
    Status st = listener_->Accept(opts_.max_payload, &conn);
    if (!st.ok()) {
      if (st.code() == Code::kResourceExhausted) PauseAccepting(st);
      if (st.code() == Code::kResourceExhausted || st.code() == Code::kUnavailable) return;
      Log().warn("dropped a connection: {}", st.message());
      continue;
    }
    const std::string peer = conn->peer();
    auto cs = std::make_unique<ConnState>();
    cs->conn = std::move(conn);
    cs->conn->user_data = cs.get();
    if (!poller_.Add(cs->conn->fd(), cs.get(), true, false).ok()) continue;
    Log().debug("connection from {}", peer);
    ConnState* raw = cs.get();
    conns_.emplace(raw, std::move(cs));
    metrics_.SetConnections(conns_.size());
    // Over every lane: the others hold the connections this one handed them.
    if (metrics_.connections() > opts_.max_connections) {
      metrics_.ConnectionRefused();
      (void)Refuse(raw, ResourceExhausted(fmt::format("the server's connection limit (--max-connections={}) is "
                                                      "reached; raise it, or spread jobs over more servers",
                                                      opts_.max_connections)));
    }
  }
}

bool ConnectionLoop::HandleReadable(ConnState* cs) {
  Status st = cs->conn->ReadAvailable(events_);
  if (cs->hand_off_lane >= 0 && !cs->closing && !cs->dead) {
    HandOff(cs);
    return false;
  }
  if (st.ok() || cs->closing || cs->dead) return true;
  events_.OnConnectionLost(cs, st);
  return true;
}

void ConnectionLoop::HandOff(ConnState* cs) {
  poller_.Remove(cs->conn->fd());
  std::erase(dirty_, cs);
  cs->dirty = false;
  auto it = conns_.find(cs);
  std::unique_ptr<ConnState> owned = std::move(it->second);
  conns_.erase(it);
  metrics_.SetConnections(conns_.size());
  events_.OnHandOff(std::move(owned));
}

// Out of file descriptors: stop accepting for a moment rather than spin on the listener.
void ConnectionLoop::PauseAccepting(const Status& why) {
  if (accept_paused_) return;
  Log().warn("not accepting connections for a moment: {}", why.message());
  if (listener_) (void)poller_.Modify(listener_->fd(), listener_.get(), false, false);
  accept_paused_ = true;
  accept_resume_at_ = Clock::now() + std::chrono::milliseconds(100);
}

Status ConnectionLoop::Adopt(std::unique_ptr<ConnState> cs) {
  cs->conn->user_data = cs.get();
  OPTCAST_RETURN_IF_ERROR(poller_.Add(cs->conn->fd(), cs.get(), true, false));
  ConnState* raw = cs.get();
  conns_.emplace(raw, std::move(cs));
  metrics_.SetConnections(conns_.size());
  return Status::Ok();
}

void ConnectionLoop::Send(ConnState* cs, transport::OutMessage msg) {
  cs->conn->Send(std::move(msg));
  MarkDirty(cs);
}

void ConnectionLoop::MarkDirty(ConnState* cs) {
  if (!cs->dirty) {
    cs->dirty = true;
    dirty_.push_back(cs);
  }
}

void ConnectionLoop::SendErrorAndClose(ConnState* cs, const Status& st, uint64_t seq) {
  if (cs->closing || cs->dead) return;
  if (!cs->job) metrics_.Error(st.code());  // a job's failure is counted once, when the job fails
  wire::ErrorMsg em{st.code(), seq, st.message()};
  cs->conn->Send(transport::MakeOutMessage(wire::EncodeError(em), nullptr, 0));
  CloseAfterFlush(cs);
}

void ConnectionLoop::CloseAfterFlush(ConnState* cs) {
  cs->closing = true;
  cs->close_by = Clock::now() + std::chrono::seconds(5);
  MarkDirty(cs);
}

Status ConnectionLoop::Refuse(ConnState* cs, const Status& st) {
  Log().warn("refusing {}: {}", cs->conn->peer(), st.message());
  SendErrorAndClose(cs, st, 0);
  return Status(Code::kCancelled, "connection refused");
}

void ConnectionLoop::FlushDirty() {
  // Completion callbacks may queue more messages, so the list can grow while we walk it.
  for (size_t i = 0; i < dirty_.size(); ++i) {
    ConnState* cs = dirty_[i];
    cs->dirty = false;
    if (cs->dead) continue;
    Status st = cs->conn->Flush();
    if (!st.ok()) {
      if (cs->closing) {
        cs->dead = true;
      } else {
        events_.OnConnectionLost(cs, st);
      }
      continue;
    }
    const bool want_write = cs->conn->HasPendingWrites();
    const bool want_read = true;  // closing connections are drained (see Poll)
    if (cs->closing && !want_write && !cs->write_shut) {
      cs->conn->ShutdownWrite();
      cs->write_shut = true;
    }
    if (want_write != cs->want_write || want_read != cs->want_read) {
      cs->want_write = want_write;
      cs->want_read = want_read;
      (void)poller_.Modify(cs->conn->fd(), cs, want_read, want_write);
    }
  }
  dirty_.clear();
}

void ConnectionLoop::ReapDead() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    ConnState* cs = it->first;
    if (!cs->dead) {
      ++it;
      continue;
    }
    if (cs->job) cs->job->Detach(cs->rank, cs, /*departed=*/false);
    poller_.Remove(cs->conn->fd());
    it = conns_.erase(it);
  }
  metrics_.SetConnections(conns_.size());
}

void ConnectionLoop::SweepIdle(Clock::time_point now) {
  if (accept_paused_ && listener_ && now >= accept_resume_at_) {
    accept_paused_ = false;
    (void)poller_.Modify(listener_->fd(), listener_.get(), true, false);
  }
  for (auto& [cs, owned] : conns_) {
    if (cs->dead) continue;
    if (cs->closing && now >= cs->close_by) cs->dead = true;
    if (cs->job || cs->upstream_of || cs->closing || now - cs->accepted_at <= opts_.hello_timeout) continue;
    if (cs->challenged) {
      metrics_.AuthFailure();
      cs->challenged = false;
      SendErrorAndClose(
          cs,
          Status(Code::kUnauthenticated, fmt::format("no proof of the secret within {} ms; this server requires "
                                                     "authentication: set OPTCAST_SECRET_FILE on the workers",
                                                     opts_.hello_timeout.count())),
          0);
    } else {
      SendErrorAndClose(
          cs,
          TimeoutError(fmt::format("no hello within {} ms; is this an Optcast client?", opts_.hello_timeout.count())),
          0);
    }
  }
}

void ConnectionLoop::CloseListener() {
  if (!listener_) return;
  poller_.Remove(listener_->fd());
  listener_.reset();
}

bool ConnectionLoop::HasPendingWrites() const {
  for (const auto& [cs, owned] : conns_) {
    if (!cs->dead && cs->conn->HasPendingWrites()) return true;
  }
  return false;
}

void ConnectionLoop::AddLevels(ServerMetrics::Levels* l) const {
  l->connections = static_cast<int64_t>(conns_.size());
  for (const auto& [cs, owned] : conns_) {
    if (cs->job) ++l->ranks;
    l->send_queue += static_cast<int64_t>(cs->conn->PendingWriteCount());
  }
}

}  // namespace optcast::server
