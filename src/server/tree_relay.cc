// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/tree_relay.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "server/tree_upstream.h"

namespace optcast::server {

using transport::OutMessage;

TreeRelay::TreeRelay(const ServerOptions& opts, ServerMetrics& metrics, ConnectionLoop& loop, JobTable& jobs,
                     BufferPool& pool, Collectives& collectives)
    : opts_(opts), metrics_(metrics), loop_(loop), jobs_(jobs), pool_(pool), collectives_(collectives) {}

Status TreeRelay::ResolveParent() {
  if (!opts_.upstream) return Status::Ok();
  OPTCAST_RETURN_IF_ERROR(server::ResolveParent(*opts_.upstream, &parent_numeric_));
  // The parent listens with the same transport as this server (and, for ofi, the same provider).
  return transport::Dialer::Create(opts_.transport, &dialer_);
}

bool TreeRelay::IsTreeJob(const Job* existing, const wire::Hello& h) const {
  // This server has a parent, or a downstream server joins, or joined before.
  return opts_.upstream || opts_.tree_root || (h.flags & wire::kHelloFromServer) != 0 ||
         (existing != nullptr && existing->tree != nullptr);
}

// One connection upstream per job, so a server holds its own ranks' connections plus one per job.
Status TreeRelay::OpenUpstream(const std::shared_ptr<Job>& job, uint32_t first_rank) {
  const std::string parent = opts_.upstream->ToString();
  std::unique_ptr<transport::Connection> conn;
  // Never blocks the loop: the hello waits in the send queue until the connection is up.
  Status st = dialer_->StartDial(parent_numeric_, opts_.max_payload, &conn);
  if (!st.ok()) {
    return Status(Code::kUnavailable, fmt::format("this server cannot reach its upstream server {} for job {}: {}; "
                                                  "start the parent first or fix --upstream / the topology file",
                                                  parent, job->hex, st.message()));
  }
  auto owned = std::make_unique<ConnState>();
  owned->conn = std::move(conn);
  ConnState* cs = owned.get();
  OPTCAST_RETURN_IF_ERROR(loop_.Adopt(std::move(owned)));
  cs->upstream_of = job;
  job->tree = std::make_unique<TreeJob>(job->nranks);
  const wire::Hello hello{job->id, job->nranks, first_rank, wire::kHelloFromServer};
  job->tree->link = std::make_unique<UpstreamLink>(parent, opts_.secret, hello);
  job->tree->up = cs;
  loop_.Send(cs, job->tree->link->HelloMessage());
  return Status::Ok();
}

MaybeFailure TreeRelay::Join(const std::shared_ptr<Job>& job, uint32_t index, bool server) {
  if (!job->tree) {
    // A flat job turns into a tree root when a downstream server joins: its ranks so far count.
    job->tree = std::make_unique<TreeJob>(job->nranks);
    std::vector<uint32_t> ranks;
    for (const auto& [r, p] : job->participants) {
      if (r != index && p.conn != nullptr) ranks.push_back(r);
    }
    std::sort(ranks.begin(), ranks.end());
    for (uint32_t r : ranks) {
      if (auto failure = AsFailure(job->tree->members.Add(r, false))) return failure;
    }
    job->SeatOpenSlots();
  }
  if (auto failure = AsFailure(job->tree->members.Add(index, server))) return failure;
  return MembershipChanged(job);
}

Status TreeRelay::OnDownstreamMessage(ConnState* cs, const wire::Message& msg) {
  std::shared_ptr<Job> job = cs->job;
  if (msg.type == wire::MsgType::kError) {
    return jobs_.Abort(job, {msg.error.code, fmt::format("downstream server {} (member {}) failed: {}",
                                                         cs->conn->peer(), cs->rank, msg.error.text)});
  }
  if (Status st = job->tree->members.Grow(cs->rank, msg.grow.weight, msg.grow.min_rank); !st.ok()) {
    return jobs_.Abort(job, {st.code(), fmt::format("job {}: {}", job->hex, st.message())});
  }
  if (auto failure = MembershipChanged(job)) return jobs_.Abort(job, *failure);
  return Status::Ok();
}

MaybeFailure TreeRelay::MembershipChanged(const std::shared_ptr<Job>& job) {
  TreeJob& t = *job->tree;
  if (t.link) {
    if (t.members.weight() == 0) return std::nullopt;
    SendUp(
        t, loop_, metrics_,
        transport::MakeOutMessage(wire::EncodeGrow(wire::Grow{t.members.weight(), t.members.min_rank()}), nullptr, 0));
    return std::nullopt;
  }
  if (t.members.complete()) return Seal(job);
  return std::nullopt;
}

MaybeFailure TreeRelay::Seal(const std::shared_ptr<Job>& job) {
  TreeJob& t = *job->tree;
  if (auto failure = AsFailure(t.members.Seal())) return failure;
  for (uint32_t index : t.members.servers()) {
    collectives_.SendTo(*job, index, transport::MakeOutMessage(wire::EncodeSealed(job->nranks), nullptr, 0));
  }
  std::vector<std::pair<uint64_t, SlotKey>> full;
  for (auto& [seq, coll] : job->colls) {
    for (auto& [key, slot] : coll.slots) {
      if (job->SlotFull(slot)) full.emplace_back(seq, key);
    }
  }
  for (const auto& [seq, key] : full) {
    if (job->failed) break;
    auto cit = job->colls.find(seq);
    if (cit == job->colls.end()) continue;
    auto sit = cit->second.slots.find(key);
    if (sit != cit->second.slots.end()) collectives_.CompleteSlot(job, cit, sit);
  }
  return std::nullopt;
}

void TreeRelay::OnUpstreamLost(ConnState* cs, const Status& why) {
  std::shared_ptr<Job> job = std::move(cs->upstream_of);
  job->tree->up = nullptr;
  cs->dead = true;
  const std::string& parent = job->tree->link->parent();
  if (!job->tree->link->welcomed()) {
    jobs_.Fail(job, {Code::kUnavailable,
                     fmt::format("this server cannot reach its upstream server {} for job {}: {}; start the parent "
                                 "first or fix --upstream / the topology file",
                                 parent, job->hex, why.message())});
    return;
  }
  // "Unavailable": this tree can no longer carry the job, and ranks with failover on drop it.
  jobs_.Fail(job, {Code::kUnavailable,
                   fmt::format("lost the upstream server {} of job {}: {}", parent, job->hex, why.message())});
}

void TreeRelay::ExpireUnwelcomed(Clock::time_point now) {
  std::vector<ConnState*> unwelcomed;
  for (const auto& [cs, owned] : loop_.conns()) {
    if (cs->upstream_of && !cs->closing && !cs->dead && !cs->upstream_of->tree->link->welcomed() &&
        now - cs->accepted_at > opts_.hello_timeout) {
      unwelcomed.push_back(cs);
    }
  }
  for (ConnState* cs : unwelcomed) {
    const std::string hint = cs->conn->SilenceHint();
    OnUpstreamLost(cs, TimeoutError(fmt::format("no welcome within {} ms{}", opts_.hello_timeout.count(),
                                                hint.empty() ? "" : "; " + hint)));
  }
}

// The handshake, Sealed, the results, or an Error that ends the job.
Status TreeRelay::OnUpstreamMeta(ConnState* cs, const wire::Message& msg, uint64_t payload_len, uint8_t** payload_dst) {
  std::shared_ptr<Job> job = cs->upstream_of;
  TreeJob& t = *job->tree;
  switch (msg.type) {
    case wire::MsgType::kChallenge:
    case wire::MsgType::kWelcome: return OnHandshake(cs, job, msg);
    case wire::MsgType::kSealed:
      if (!t.link->welcomed() || msg.sealed_nranks != job->nranks) {
        return ProtocolError("the upstream server sealed the job before its welcome, or with another rank count");
      }
      if (auto failure = Seal(job)) return jobs_.Abort(job, *failure);
      return Status::Ok();
    case wire::MsgType::kError:
      return jobs_.Abort(job, {msg.error.code, fmt::format("the upstream server {} failed job {}: {}", t.link->parent(),
                                                           job->hex, msg.error.text)});
    case wire::MsgType::kResult: return OnUpstreamResult(cs, job, msg, payload_len, payload_dst);
    default:
      return ProtocolError(fmt::format("the upstream server {} sent message type {}, which a parent never sends",
                                       t.link->parent(), static_cast<int>(msg.type)));
  }
}

Status TreeRelay::OnHandshake(ConnState* cs, const std::shared_ptr<Job>& job, const wire::Message& msg) {
  TreeJob& t = *job->tree;
  std::vector<OutMessage> reply;
  OPTCAST_RETURN_IF_ERROR(t.link->OnHandshake(msg, &reply));
  for (auto& m : reply) cs->conn->Send(std::move(m));
  if (t.link->welcomed()) {
    for (auto& m : t.link->TakeHeld()) SendUp(t, loop_, metrics_, std::move(m));
    if (t.link->close_after_welcome()) {
      CloseUpstream(t, loop_, {});  // the farewell just went out with the held messages
      return Status::Ok();
    }
  }
  loop_.MarkDirty(cs);
  return Status::Ok();
}

Status TreeRelay::OnUpstreamResult(ConnState* cs, const std::shared_ptr<Job>& job, const wire::Message& msg,
                                   uint64_t payload_len, uint8_t** payload_dst) {
  auto cit = job->colls.find(msg.done.coll_seq);
  const SlotKey key{msg.done.ref.segment, msg.done.ref.offset};
  if (cit == job->colls.end() || cit->second.slots.count(key) == 0) {
    return ProtocolError(
        fmt::format("the upstream server sent a result for element {} of collective #{}, which this "
                    "server did not send",
                    msg.done.ref.offset, msg.done.coll_seq));
  }
  Slot& slot = cit->second.slots.at(key);
  const uint64_t bytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(cit->second.desc.dtype);
  if (msg.done.ref.count != slot.ref.count || payload_len != bytes) {
    return ProtocolError(
        fmt::format("the upstream result at element {} has {} elements ({} bytes); expected {} ({} "
                    "bytes)",
                    msg.done.ref.offset, msg.done.ref.count, payload_len, slot.ref.count, bytes));
  }
  if (auto failure = jobs_.ChargeBuffer(*job, BufferPool::CapacityFor(bytes), "an upstream result")) {
    return jobs_.Abort(job, *failure);
  }
  auto buf = pool_.Get(bytes, job->memory);
  if (!buf) return ResourceExhausted(fmt::format("cannot allocate {} bytes for a result", bytes));
  slot.result = buf;  // the partial sent up stays alive in its message until written
  cs->rx_dst = buf;   // and the result's buffer until it has landed, even if the job fails
  *payload_dst = buf.get();
  cs->rx_chunk = true;
  cs->rx_seq = msg.done.coll_seq;
  cs->rx_key = key;
  return Status::Ok();
}

Status TreeRelay::OnUpstreamComplete(ConnState* cs) {
  if (!cs->rx_chunk) return Status::Ok();
  cs->rx_chunk = false;
  std::shared_ptr<Job> job = cs->upstream_of;
  if (!job || job->failed) return Status::Ok();
  auto cit = job->colls.find(cs->rx_seq);
  if (cit == job->colls.end()) return InternalError("collective vanished while receiving its result");
  auto sit = cit->second.slots.find(cs->rx_key);
  if (sit == cit->second.slots.end()) return InternalError("chunk slot vanished while receiving its result");
  collectives_.Progressed(*job);
  metrics_.BytesIn(static_cast<uint64_t>(sit->second.ref.count) * DataTypeSize(cit->second.desc.dtype));
  collectives_.SendReduced(job, cit, sit);
  return Status::Ok();
}

}  // namespace optcast::server
