// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// How a client's collectives move: chunks sent up to each link's window, the links polled and
// read, the timeout that asks the servers what a collective waits for, and what a lost server or
// a broken communicator does to the collectives in flight.

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <unordered_map>

#include "client/server_communicator.h"
#include "common/log.h"

namespace optcast::client {

// Sends chunks up to the window on every link, one chunk per link per round, so that every
// server gets chunk k before any gets chunk k+1, and every rank goes round the links in the
// same order, so that a server has chunk k from every rank soon after the first one. Each
// chunk is handed to its connection at once: the host sends the links' bytes in the order they
// were written, and a link written in one piece goes out whole before the next link's first
// chunk, so that every server waits for the last link's turn (docs/benchmarks.md). With one
// link there is no other turn to wait for: its chunks go out together, in one write, when the
// caller flushes.
void ServerCommunicator::FillWindows() {
  const size_t n = servers_.size();
  const bool flush_each_chunk = n > 1;
  for (bool sent = true; sent;) {
    sent = false;
    for (size_t i = 0; i < n; ++i) {
      ServerLink& s = servers_[i];
      if (s.failed) continue;
      while (!s.queue.empty() && s.queue.front().next == s.queue.front().chunks.size()) s.queue.pop_front();
      if (s.queue.empty()) continue;
      PendingSends& ps = s.queue.front();
      const wire::ChunkRef& ref = ps.chunks[ps.next];
      const uint64_t bytes = static_cast<uint64_t>(ref.count) * ps.req->esize;
      if (!s.window.HasRoom(bytes)) continue;
      const uint8_t flags = ps.flags.empty() ? 0 : ps.flags[ps.next];
      ++ps.next;
      // A result copy re-sends a result, already in the wire type; an input is rounded first.
      if (ps.req->narrowing && (flags & wire::kChunkResultCopy) == 0) {
        ps.req->narrowing->NarrowForSend(ref.offset, ref.count);
      }
      const uint8_t* src = striping_.ChunkSource(*ps.req, ref, flags);
      wire::Chunk chunk{ps.desc, ref, flags};
      transport::OutMessage msg;
      wire::EncodeChunkTo(chunk, transport::StartOutMessage(&msg, wire::kChunkMetaBytes, src, bytes));
      msg.tag = ps.req->seq;
      msg.traffic_class = TrafficClassOf(ps.desc.count * ps.req->esize);
      if (s.trace_track != 0) TraceSend(&s, &msg);
      s.window.OnSent(bytes);
      if (ps.next == ps.chunks.size()) s.queue.pop_front();
      s.conn->Send(std::move(msg));
      if (flush_each_chunk) FlushLink(s);  // may fail the link, and with it requests queued on other links
      sent = true;
    }
  }
}

void ServerCommunicator::Progress(int timeout_ms) {
  ReadEarlyMessages();
  FillWindows();
  FlushAll();
  if (requests_.empty()) return;
  pollfd fds[64];
  const size_t n = std::min<size_t>(servers_.size(), 64);
  for (size_t i = 0; i < n; ++i) fds[i] = servers_[i].PollEntry();
  int rc = ::poll(fds, n, timeout_ms);
  if (rc > 0) {
    for (size_t i = 0; i < n; ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        if (servers_[i].failed) continue;
        Status st = servers_[i].conn->ReadAvailable(*this);
        if (!st.ok()) {
          if (st.code() == Code::kUnavailable) {
            st = UnavailableError("lost the connection to server " + servers_[i].address + ": " + st.message() +
                                  "; the server may have died or dropped this job");
          }
          FailLink(servers_[i], st);
        }
      }
    }
    FillWindows();
    FlushAll();
  }
  if (opts_.failover && broken_.ok()) {
    failover_.Advance();
    FillWindows();
    FlushAll();
  }
  CheckTimeout();
}

void ServerCommunicator::CheckTimeout() {
  // Once the communicator has failed, what is still in flight may yet finish on servers that
  // had every rank's input (FailLink), but not after a pause: it then fails with the reason
  // already known (a rank that gave up names the server it lost), not with a timeout's guess.
  const auto limit = broken_.ok() ? opts_.timeout : std::min(opts_.timeout, kBrokenGrace);
  if (requests_.empty() || Clock::now() - last_progress_ <= limit) {
    stall_.Reset();  // progress resumed: a later timeout asks afresh
    return;
  }
  if (!broken_.ok()) {
    const Status why = broken_;
    Break(why);
    return;
  }
  const Request* oldest = requests_.Oldest();
  if (!stall_.asked() || stall_.coll_seq() != oldest->seq) {
    const uint64_t oldest_seq = oldest->seq;
    AskWhatStalls(*oldest);
    // Asking flushes, and a failed flush reads what the server sent last, which may finish (and
    // free) requests, this one among them, or break the communicator: look it up again.
    if (!broken_.ok()) return;
    oldest = requests_.Find(oldest_seq);
    if (oldest == nullptr) return;
  }
  if (!stall_.Done(Clock::now())) return;
  Break(TimeoutError(fmt::format(
      "collective #{} ({} of {} {}) made no progress for {} ms; {}{} (set "
      "OPTCAST_TIMEOUT_MS to wait longer)",
      oldest->seq, CollTypeName(oldest->desc.coll), oldest->desc.count, DataTypeName(oldest->desc.dtype),
      opts_.timeout.count(), stall_.Describe(std::min(opts_.timeout, kStallAnswerWait)), failover_.Pending())));
  stall_.Reset();
}

// Asks every live server that owes `req` a reply which ranks it is waiting for (stall_query.h);
// Progress reads the answers like any other message. After a failover a server may owe only a
// re-run of the dead servers' share: it is asked about that.
void ServerCommunicator::AskWhatStalls(const Request& req) {
  std::vector<StallQuery::Server> asked;
  for (auto& s : servers_) {
    if (s.failed || req.pending_link[s.index] == 0) continue;
    uint64_t seq = UINT64_MAX;
    for (const Piece& p : req.pieces) {
      if (p.awaiting && p.link == s.index) seq = std::min(seq, p.coll_seq);
    }
    if (seq == UINT64_MAX) seq = req.seq;
    s.SendControl(wire::EncodeStallQuery(seq));
    asked.push_back({s.index, s.address, seq});
  }
  stall_.Begin(req.seq, std::move(asked), Clock::now() + std::min(opts_.timeout, kStallAnswerWait));
  FlushAll();
}

void ServerCommunicator::FlushAll() {
  for (auto& s : servers_) FlushLink(s);
}

void ServerCommunicator::FlushLink(ServerLink& s) {
  if (s.failed || !s.conn->HasPendingWrites()) return;
  Status st = s.conn->Flush();
  if (!st.ok()) {
    // The server may have closed after sending an error: that error is the better news.
    Status why = UnavailableError("lost the connection to server " + s.address + ": " + st.message());
    Status read = s.conn->ReadAvailable(*this);
    if (!read.ok() && read.code() != Code::kUnavailable) why = read;
    FailLink(s, why);
  }
}

// Collectives that only need other servers may still finish; no new collective can start.
void ServerCommunicator::FailLink(ServerLink& link, const Status& why) {
  if (link.failed) return;
  if (opts_.failover && broken_.ok() && why.code() == Code::kUnavailable) {
    failover_.LoseServer(link, why);
    return;
  }
  link.failed = true;
  link.queue.clear();
  link.rx_req = nullptr;
  link.rx_stale = false;
  link.rx_into_copy = false;
  if (link.conn) link.conn->DropPendingWrites();
  if (!failover_.settled()) {
    // A lost server's share waits for a failover that can no longer be agreed (this error ends
    // failover): nothing in flight can finish.
    Break(why);
    return;
  }
  if (broken_.ok()) {
    broken_ = why;
    Log().error("rank {}: {}", opts_.rank, why.message());
  }
  Abandon(requests_.TakeWaitingOn(link.index), why);
  TellServersWhy();
}

// This rank gives up because it lost a server: the servers left fail the job with its reason,
// so that every other rank's error names the dead server and not only this rank's departure
// (which another rank may hear of first). Once. (A timeout is not sent: the other ranks wait
// on the same collective, and their own timeouts name what it waits for.)
void ServerCommunicator::TellServersWhy() {
  if (told_servers_ || broken_.code() != Code::kUnavailable) return;
  told_servers_ = true;
  const auto text = wire::EncodeError({broken_.code(), 0, broken_.message()});
  for (auto& s : servers_) {
    if (s.failed || !s.conn) continue;
    s.SendControl(text);
    // Out now, while the process may still be about to exit; a failure here is found by the
    // next read of this link.
    (void)s.conn->Flush();
  }
}

// Their buffers go back to the caller, so nothing may read them later: unsent chunks are
// forgotten and a chunk half written on a live link is finished from a copy.
void ServerCommunicator::Abandon(const std::vector<Request*>& reqs, const Status& why) {
  if (reqs.empty()) return;
  std::unordered_map<uint64_t, bool> seqs;
  for (Request* r : reqs) seqs[r->seq] = true;
  for (auto& s : servers_) {
    for (auto it = s.queue.begin(); it != s.queue.end();) {
      it = seqs.count(it->req->seq) ? s.queue.erase(it) : it + 1;
    }
    if (s.failed) continue;
    if (s.rx_req != nullptr && seqs.count(s.rx_req->seq) != 0) {
      // A result is still landing in a buffer that goes back to the caller: the connection
      // goes, so that nothing writes there any more, and with it what else waited on it.
      s.conn.reset();
      FailLink(s, why);
      continue;
    }
    s.conn->DetachPayloads([&](uint64_t tag) { return seqs.count(tag) > 0; });
  }
  for (Request* r : reqs) {
    r->status = why;
    r->done = true;
    TraceRequestEnd(r);
  }
}

// The communicator cannot continue: every collective in flight fails with `why`, and so will
// every later call.
void ServerCommunicator::Break(const Status& why) {
  if (broken_.ok()) {
    broken_ = why;
    Log().error("rank {}: {}", opts_.rank, why.message());
  }
  Abandon(requests_.TakeAll(), why);
  TellServersWhy();
}

}  // namespace optcast::client
