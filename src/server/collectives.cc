// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/collectives.h"

#include <fmt/format.h>

#include <algorithm>

#include "observe/trace.h"
#include "server/tree_math.h"
#include "server/tree_upstream.h"

namespace optcast::server {
namespace {

// Finished chunk slots kept for reuse (more are freed): enough for every chunk in flight of
// many jobs.
constexpr size_t kMaxFreeSlots = 4096;

}  // namespace

using transport::OutMessage;

Collectives::Collectives(const ServerOptions& opts, ServerMetrics& metrics, ConnectionLoop& loop, JobTable& jobs,
                         BufferPool& pool, ReductionDispatcher& dispatcher)
    : opts_(opts), metrics_(metrics), loop_(loop), jobs_(jobs), pool_(pool), dispatcher_(dispatcher) {}

Status Collectives::OnChunkMeta(ConnState* cs, const wire::Chunk& chunk, uint64_t payload_len, uint8_t** payload_dst) {
  if (!cs->job) return ProtocolError("data before hello; say hello first");
  std::shared_ptr<Job> job = cs->job;
  const wire::CollDesc& d = chunk.desc;
  OPTCAST_RETURN_IF_ERROR(ValidateChunk(chunk, job->nranks, cs->rank));
  if (job->tree && d.coll != CollType::kAllReduce) {
    return jobs_.Abort(
        job, {Code::kInvalidArgument,
              fmt::format("collective #{} of job {} is a {}, but an aggregation tree carries only allreduce; run "
                          "{} over a flat server list (OPTCAST_SERVERS naming servers without --upstream)",
                          d.coll_seq, job->hex, CollTypeName(d.coll), CollTypeName(d.coll))});
  }
  // A downstream server sends partials, which may be wider than the elements (tree_math.h), or
  // in a failover's re-run a result copy, in the element type.
  const bool copy = (chunk.flags & wire::kChunkResultCopy) != 0;
  const DataType wire_type = cs->server_member && !copy ? PartialType(d.dtype, d.op) : d.dtype;
  const uint64_t expect_bytes = static_cast<uint64_t>(chunk.ref.count) * DataTypeSize(wire_type);
  if (payload_len != expect_bytes) {
    return ProtocolError(fmt::format("chunk of {} {} carries {} bytes instead of {}", chunk.ref.count,
                                     DataTypeName(wire_type), payload_len, expect_bytes));
  }
  if (d.epoch > job->failover.epoch) {
    return ProtocolError(
        fmt::format("rank {} sent collective #{} striped at failover epoch {} before moving the job "
                    "there (this server is at epoch {})",
                    cs->rank, d.coll_seq, d.epoch, job->failover.epoch));
  }
  if (job->failover.IsStale(d)) {
    // Sent before its rank learned of a failover that striped the collective again: dropped.
    std::shared_ptr<uint8_t> sink(new uint8_t[payload_len > 0 ? payload_len : 1], std::default_delete<uint8_t[]>());
    cs->rx_dst = sink;
    *payload_dst = sink.get();
    cs->rx_chunk = false;
    return Status::Ok();
  }
  if (auto failure = Admit(*job, cs->rank, d)) return jobs_.Abort(job, *failure);
  CollIt cit;
  if (auto failure = OpenCollective(job, cs->rank, d, &cit)) return jobs_.Abort(job, *failure);
  SlotIt sit;
  if (auto failure = OpenSlot(*job, cit->second, cs->rank, chunk.ref, &sit)) return jobs_.Abort(job, *failure);
  Slot& slot = sit->second;
  const size_t idx = d.coll == CollType::kAllGather ? 0 : job->SeatOf(cs->rank);
  if (slot.have[job->SeatOf(cs->rank)] || slot.contribs[idx]) {
    return ProtocolError(fmt::format("rank {} sent the chunk at element {} of collective #{} twice", cs->rank,
                                     chunk.ref.offset, d.coll_seq));
  }
  if (chunk.flags != 0 && d.coll == CollType::kAllGather) {
    return ProtocolError("a result copy is only sent to re-run an allreduce or reduce-scatter");
  }
  if ((chunk.flags & wire::kChunkResultCopy) != 0 && slot.copy_seat < 0) slot.copy_seat = static_cast<int32_t>(idx);
  if ((chunk.flags & wire::kChunkInputLost) != 0) slot.input_lost = true;
  return ReceiveInto(job, cs, cit, sit, expect_bytes, payload_dst);
}

MaybeFailure Collectives::Admit(Job& job, uint32_t rank, const wire::CollDesc& d) const {
  const bool new_coll = job.colls.find(d.coll_seq) == job.colls.end();
  if (job.departed_count > 0 && new_coll) {
    return JobFailure{Code::kPeerFailed, fmt::format("rank {} has left job {}, so collective #{} cannot complete",
                                                     job.FirstDeparted(), job.hex, d.coll_seq)};
  }
  const Participant& sender = job.participants.at(rank);
  if (sender.open_chunks >= opts_.max_open_chunks_per_rank) {
    return JobFailure{Code::kResourceExhausted,
                      fmt::format("rank {} of job {} has {} chunks on this server without an answer, the limit "
                                  "(--max-open-chunks={}); lower OPTCAST_WINDOW, or look for a rank that stopped "
                                  "calling collectives while this one ran ahead",
                                  rank, job.hex, sender.open_chunks, opts_.max_open_chunks_per_rank),
                      /*over_limit=*/true};
  }
  if (new_coll && jobs_.draining()) {
    return JobFailure{
        Code::kUnavailable,
        fmt::format("the server is shutting down; collective #{} of job {} was not started", d.coll_seq, job.hex)};
  }
  return std::nullopt;
}

MaybeFailure Collectives::OpenCollective(const std::shared_ptr<Job>& job, uint32_t rank, const wire::CollDesc& d,
                                         CollIt* out) {
  auto cit = job->colls.find(d.coll_seq);
  if (cit == job->colls.end()) {
    // Charged as members join it (below): a tree's seats grow until it is sealed.
    const uint64_t state_bytes = CollStateBytes(0);
    if (auto failure = jobs_.ChargeState(*job, state_bytes, "collective")) return failure;
    cit = job->colls.try_emplace(d.coll_seq).first;
    CollState& coll = cit->second;
    coll.desc = d;
    coll.first_rank = rank;
    coll.state_bytes = state_bytes;
    coll.incarnation = ++last_incarnation_;
    job->last_progress = Clock::now();
  }
  CollState& coll = cit->second;
  if (!(coll.desc == d)) return JobFailure{Code::kMismatch, DescribeMismatch(coll.desc, coll.first_rank, d, rank)};
  if (coll.joined.count(rank) == 0) {
    const uint64_t member_bytes = CollStateBytes(1) - CollStateBytes(0);
    if (auto failure = jobs_.ChargeState(*job, member_bytes, "collective")) return failure;
    coll.state_bytes += member_bytes;
    coll.joined.insert(rank);
    // All-gather chunks that completed before this rank issued the collective.
    for (auto& delivery : coll.ag_waiting) {
      SendAgChunk(job, rank, delivery);
      --delivery->not_joined;
    }
    std::erase_if(coll.ag_waiting, [](const auto& dl) { return dl->not_joined == 0; });
  }
  *out = cit;
  return std::nullopt;
}

MaybeFailure Collectives::OpenSlot(Job& job, CollState& coll, uint32_t rank, const wire::ChunkRef& ref, SlotIt* out) {
  const wire::CollDesc& d = coll.desc;
  const SlotKey key{ref.segment, ref.offset};
  auto sit = coll.slots.find(key);
  if (sit == coll.slots.end()) {
    const uint32_t seats = job.Seats();
    if (auto failure = jobs_.ChargeState(job, SlotStateBytes(seats), "chunk")) return failure;
    sit = NewSlot(&coll.slots, key);
    Slot& slot = sit->second;
    slot.arrived = 0;
    slot.ref = ref;
    slot.expected = d.coll == CollType::kAllGather ? 1 : job.nranks;
    slot.contribs.resize(d.coll == CollType::kAllGather ? 1 : seats);
    slot.have.assign(seats, 0);
    slot.first_arrival = Clock::now();
    slot.state_bytes = SlotStateBytes(seats);
    slot.copy_seat = -1;
    slot.input_lost = false;
  } else {
    Slot& slot = sit->second;
    if (slot.ref.count != ref.count) {
      return JobFailure{Code::kMismatch,
                        fmt::format("ranks cut collective #{} differently: the chunk at element {} has {} elements "
                                    "from one rank and {} from rank {}; use the same chunk size on every rank",
                                    d.coll_seq, ref.offset, slot.ref.count, ref.count, rank)};
    }
    if (job.tree && job.SeatOf(rank) >= slot.have.size()) {
      // A member that joined this tree after the slot was opened (the job is not sealed yet).
      slot.have.resize(job.Seats(), 0);
      slot.contribs.resize(job.Seats());
    }
  }
  *out = sit;
  return std::nullopt;
}

Status Collectives::ReceiveInto(const std::shared_ptr<Job>& job, ConnState* cs, CollIt cit, SlotIt sit, uint64_t bytes,
                                uint8_t** payload_dst) {
  Slot& slot = sit->second;
  const size_t idx = cit->second.desc.coll == CollType::kAllGather ? 0 : job->SeatOf(cs->rank);
  if (auto failure = jobs_.ChargeBuffer(*job, BufferPool::CapacityFor(bytes), "a chunk")) {
    return jobs_.Abort(job, *failure);
  }
  auto buf = pool_.Get(bytes, job->memory);
  if (!buf) return ResourceExhausted(fmt::format("cannot allocate {} bytes for a chunk", bytes));
  ++job->participants.at(cs->rank).open_chunks;
  slot.contribs[idx] = buf;
  cs->rx_dst = buf;
  *payload_dst = buf.get();
  if (cs->trace_track != 0) cs->rx_start_us = observe::TraceNowUs();
  cs->rx_chunk = true;
  cs->rx_seq = cit->first;
  cs->rx_key = sit->first;
  cs->rx_incarnation = cit->second.incarnation;
  return Status::Ok();
}

Status Collectives::OnChunkComplete(ConnState* cs) {
  if (!cs->rx_chunk) return Status::Ok();
  cs->rx_chunk = false;
  std::shared_ptr<Job> job = cs->job;
  if (job == nullptr || job->failed) return Status::Ok();
  auto cit = job->colls.find(cs->rx_seq);
  if (cit == job->colls.end() || cit->second.incarnation != cs->rx_incarnation) {
    // A failover dropped the collective while this chunk arrived (its seat was answered then),
    // and its re-run may have opened a new one under the same number: nobody waits for this one.
    if (job->failover.epoch > 0) return Status::Ok();
    return InternalError("collective vanished while receiving");
  }
  auto sit = cit->second.slots.find(cs->rx_key);
  if (sit == cit->second.slots.end()) return InternalError("chunk slot vanished while receiving");
  Slot& slot = sit->second;
  slot.have[job->SeatOf(cs->rank)] = 1;
  ++slot.arrived;
  Progressed(*job);
  const uint64_t bytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(cit->second.desc.dtype);
  metrics_.BytesIn(bytes);
  if (cs->trace_track != 0) {
    observe::TraceComplete("recv", "server", cs->rx_start_us, observe::TraceNowUs(),
                           ChunkTraceArgs(cit->second.desc, slot.ref, bytes), cs->trace_track);
  }
  if (job->SlotFull(slot)) CompleteSlot(job, cit, sit);
  return Status::Ok();
}

void Collectives::Progressed(Job& job) {
  job.last_progress = Clock::now();
  last_activity_ = job.last_progress;
}

void Collectives::CompleteSlot(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit) {
  Slot& slot = sit->second;
  if (slot.copy_seat >= 0) {
    // A re-run after a failover: a rank already holds this chunk's result, and every copy is the
    // same, so it goes back as it came, with no reduction that could differ in the last bit (in
    // a tree it goes up as a copy, and the root sends it back down).
    slot.result = slot.contribs[static_cast<size_t>(slot.copy_seat)];
    OnReduced(job, cit, sit);
    return;
  }
  // Below a tree's root the partial goes up flagged: another rack may hold the result whole.
  if (slot.input_lost && (!job->tree || job->tree->root())) {
    jobs_.Fail(job, {Code::kPeerFailed,
                     fmt::format("collective #{} of job {} cannot be re-run exactly after a failover: a rank's input "
                                 "at element {} was overwritten in place by a result that the dead server cut short, "
                                 "and no rank holds that result whole",
                                 wire::RootSeq(cit->first), job->hex, slot.ref.offset)});
    return;
  }
  if (job->tree || cit->second.desc.coll != CollType::kAllGather) {
    dispatcher_.Reduce(job, cit, sit);
    return;
  }
  Forward(job, cit->second, sit->second);
  FinishSlot(job, cit, sit);
}

void Collectives::OnReduced(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit) {
  // Below the root of a tree the partial goes up; the parent's result comes back later.
  if (job->tree && !job->tree->root()) {
    SendPartialUp(*job->tree, loop_, metrics_, cit->second.desc, sit->second, opts_.TrafficClassOf(cit->second.desc));
    return;
  }
  SendReduced(job, cit, sit);
}

void Collectives::SendReduced(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit) {
  const wire::CollDesc& d = cit->second.desc;
  const Slot& slot = sit->second;
  const uint64_t bytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(d.dtype);
  const wire::ChunkDone done{d.coll_seq, slot.ref};
  const transport::TrafficClass traffic_class = opts_.TrafficClassOf(d);
  // Only the members here: in a tree, not every rank of the job.
  job->ForEachMember([&](uint32_t r) {
    job->Answered(r);
    OutMessage m;
    if (d.coll == CollType::kAllReduce || r == slot.ref.segment) {
      wire::EncodeDoneTo(wire::MsgType::kResult, done,
                         transport::StartOutMessage(&m, wire::kDoneMetaBytes, slot.result.get(), bytes));
      m.keepalive = slot.result;
    } else {
      wire::EncodeDoneTo(wire::MsgType::kAck, done, transport::StartOutMessage(&m, wire::kDoneMetaBytes, nullptr, 0));
    }
    m.traffic_class = traffic_class;
    SendTo(*job, r, std::move(m));
  });
  FinishSlot(job, cit, sit);
}

void Collectives::SendTo(Job& job, uint32_t index, OutMessage msg) {
  ConnState* cs = job.ConnOf(index);
  if (cs == nullptr || cs->closing || cs->dead) return;
  metrics_.BytesOut(msg.payload_len);
  if (cs->trace_track != 0) TraceSend(cs, &msg);
  loop_.Send(cs, std::move(msg));
}

void Collectives::FinishSlot(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit) {
  CollState& coll = cit->second;
  metrics_.ChunkDone(Clock::now() - sit->second.first_arrival);
  coll.elems_done += sit->second.ref.count;
  jobs_.ReleaseState(*job, sit->second.state_bytes);
  RecycleSlot(coll.slots.extract(sit));
  if (coll.elems_done >= coll.desc.server_elems && coll.slots.empty() && coll.ag_waiting.empty()) {
    metrics_.CollectiveDone(coll.desc.coll);
    const uint64_t state_bytes = coll.state_bytes;
    job->colls.erase(cit);  // `coll` is gone
    jobs_.ReleaseState(*job, state_bytes);
  }
}

void Collectives::DropCollectives(const std::shared_ptr<Job>& job,
                                  const std::function<bool(const wire::CollDesc&)>& stale) {
  for (auto cit = job->colls.begin(); cit != job->colls.end();) {
    CollState& coll = cit->second;
    if (!stale(coll.desc)) {
      ++cit;
      continue;
    }
    for (auto& [key, slot] : coll.slots) {
      for (size_t seat = 0; seat < slot.contribs.size(); ++seat) {
        if (!slot.contribs[seat]) continue;
        // A seat is its member's place in a tree's join order (Job::SeatOf), a rank in a flat job.
        const uint32_t member = job->tree ? job->tree->members.seated()[seat] : static_cast<uint32_t>(seat);
        job->Answered(coll.desc.coll == CollType::kAllGather ? slot.ref.segment : member);
      }
      jobs_.ReleaseState(*job, slot.state_bytes);
    }
    jobs_.ReleaseState(*job, coll.state_bytes);
    cit = job->colls.erase(cit);
  }
}

// Slots are map nodes: finished ones are kept (with their vectors' capacity) for the next chunks.
SlotIt Collectives::NewSlot(std::map<SlotKey, Slot>* slots, const SlotKey& key) {
  if (free_slots_.empty()) return slots->try_emplace(key).first;
  auto node = std::move(free_slots_.back());
  free_slots_.pop_back();
  node.key() = key;
  return slots->insert(std::move(node)).position;
}

void Collectives::RecycleSlot(std::map<SlotKey, Slot>::node_type node) {
  node.mapped().contribs.clear();  // lets go of the buffers now
  node.mapped().result.reset();
  if (free_slots_.size() < kMaxFreeSlots) free_slots_.push_back(std::move(node));
}

void Collectives::Forward(const std::shared_ptr<Job>& job, CollState& coll, const Slot& slot) {
  const wire::CollDesc& d = coll.desc;
  const wire::ChunkDone done{d.coll_seq, slot.ref};
  auto delivery = std::make_shared<AgDelivery>();
  delivery->data = slot.contribs[0];
  delivery->bytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(d.dtype);
  delivery->done = done;
  delivery->src = slot.ref.segment;
  delivery->result_meta = wire::EncodeResult(done);
  delivery->unsent = job->nranks - 1;
  delivery->epoch = d.epoch;
  delivery->traffic_class = opts_.TrafficClassOf(d);
  if (delivery->unsent == 0) {
    SendAck(job, delivery->src, done, d.epoch, delivery->traffic_class);
    return;
  }
  for (uint32_t r = 0; r < job->nranks; ++r) {
    if (r == delivery->src) continue;
    if (coll.joined.count(r) != 0) {
      SendAgChunk(job, r, delivery);
    } else {
      ++delivery->not_joined;
    }
  }
  if (delivery->not_joined > 0) coll.ag_waiting.push_back(std::move(delivery));
}

void Collectives::SendAgChunk(const std::shared_ptr<Job>& job, uint32_t rank,
                              const std::shared_ptr<AgDelivery>& delivery) {
  OutMessage m = transport::MakeOutMessage(delivery->result_meta, delivery->data.get(), delivery->bytes);
  m.keepalive = delivery->data;
  m.traffic_class = delivery->traffic_class;
  m.on_done = [this, weak = std::weak_ptr<Job>(job), delivery] {
    if (--delivery->unsent == 0) {
      SendAck(weak, delivery->src, delivery->done, delivery->epoch, delivery->traffic_class);
    }
  };
  SendTo(*job, rank, std::move(m));
}

// The source of an all-gather chunk learns that every other rank has it; not for stripes that a
// failover replaced meanwhile (the rank no longer waits for them, and the server told it that
// nothing of them follows).
void Collectives::SendAck(const std::weak_ptr<Job>& weak, uint32_t rank, const wire::ChunkDone& done, uint32_t epoch,
                          transport::TrafficClass traffic_class) {
  std::shared_ptr<Job> job = weak.lock();
  if (!job || job->failed) return;
  job->Answered(rank);
  wire::CollDesc d;
  d.coll_seq = done.coll_seq;
  d.epoch = epoch;
  if (job->failover.IsStale(d)) return;
  OutMessage m = transport::MakeOutMessage(wire::EncodeAck(done), nullptr, 0);
  m.traffic_class = traffic_class;
  SendTo(*job, rank, std::move(m));
}

// Draws the message's time on the wire on its connection's track: from when the connection was
// free to write it (queued messages go out in order) until its last byte left.
void Collectives::TraceSend(ConnState* cs, OutMessage* msg) {
  const double queued = observe::TraceNowUs();
  const bool has_result = msg->payload_len > 0;
  msg->on_done = [cs, queued, has_result, bytes = msg->payload_len, then = std::move(msg->on_done)] {
    const double now = observe::TraceNowUs();
    const double start = std::max(queued, cs->tx_free_us);
    cs->tx_free_us = now;
    observe::TraceArgs a;
    a.Add("bytes", bytes);
    observe::TraceComplete(has_result ? "send" : "send ack", "server", start, now, a, cs->trace_track_tx);
    if (then) then();
  };
}

}  // namespace optcast::server
