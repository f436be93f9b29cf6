// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/job.h"

#include <fmt/format.h>

#include <algorithm>

namespace optcast::server {

// A collective's `joined` set holds one entry per member, about 16 bytes each.
uint64_t CollStateBytes(uint32_t members) { return sizeof(CollState) + 64 + uint64_t{members} * 16; }

uint64_t SlotStateBytes(uint32_t seats) {
  return sizeof(Slot) + 64 + static_cast<uint64_t>(seats) * (sizeof(std::shared_ptr<uint8_t>) + 1);
}

std::vector<uint32_t> Job::Members() const {
  std::vector<uint32_t> all;
  ForEachMember([&](uint32_t index) { all.push_back(index); });
  return all;
}

ConnState* Job::ConnOf(uint32_t index) const {
  auto it = participants.find(index);
  return it == participants.end() ? nullptr : it->second.conn;
}

void Job::Attach(uint32_t index, ConnState* conn) {
  Participant& p = participants[index];
  if (p.conn == nullptr) ++connected;
  p.conn = conn;
}

void Job::Detach(uint32_t index, const ConnState* conn, bool departed) {
  auto it = participants.find(index);
  if (it == participants.end()) return;
  Participant& p = it->second;
  if (p.conn != nullptr && p.conn == conn) {
    p.conn = nullptr;
    --connected;
  }
  if (departed && !p.departed) {
    p.departed = true;
    ++departed_count;
  }
}

void Job::Answered(uint32_t index) {
  if (auto it = participants.find(index); it != participants.end() && it->second.open_chunks > 0) {
    --it->second.open_chunks;
  }
}

uint32_t Job::FirstDeparted() const {
  uint32_t first = UINT32_MAX;
  for (const auto& [index, p] : participants) {
    if (p.departed) first = std::min(first, index);
  }
  return first;
}

void Job::SeatOpenSlots() {
  const std::vector<uint32_t>& seated = tree->members.seated();
  for (auto& [seq, coll] : colls) {
    const bool gather = coll.desc.coll == CollType::kAllGather;
    for (auto& [key, slot] : coll.slots) {
      std::vector<std::shared_ptr<uint8_t>> contribs(gather ? 1 : seated.size());
      std::vector<uint8_t> have(seated.size(), 0);
      if (gather) contribs[0] = std::move(slot.contribs[0]);
      for (size_t seat = 0; seat < seated.size(); ++seat) {
        if (!gather) contribs[seat] = std::move(slot.contribs[seated[seat]]);
        have[seat] = slot.have[seated[seat]];
      }
      slot.contribs = std::move(contribs);
      slot.have = std::move(have);
    }
  }
}

observe::TraceArgs ChunkTraceArgs(const wire::CollDesc& d, const wire::ChunkRef& ref, uint64_t bytes) {
  observe::TraceArgs a;
  a.Add("coll", CollTypeName(d.coll)).Add("seq", d.coll_seq).Add("segment", ref.segment).Add("offset", ref.offset);
  a.Add("bytes", bytes);
  return a;
}

std::string DescribeColl(const wire::CollDesc& d) {
  if (d.coll == CollType::kAllGather) {
    return fmt::format("{} of {} {}", CollTypeName(d.coll), d.count, DataTypeName(d.dtype));
  }
  return fmt::format("{} of {} {} ({})", CollTypeName(d.coll), d.count, DataTypeName(d.dtype), RedOpName(d.op));
}

std::string DescribeMismatch(const wire::CollDesc& a, uint32_t rank_a, const wire::CollDesc& b, uint32_t rank_b) {
  std::string what;
  if (a.epoch != b.epoch) {
    what = fmt::format(
        "failover epoch: rank {} striped it after {} failover(s), rank {} after {}; the ranks did not agree on the "
        "servers left",
        rank_a, a.epoch, rank_b, b.epoch);
  } else if (a.coll != b.coll) {
    what = fmt::format("collective type: rank {} called {}, rank {} called {}", rank_a, CollTypeName(a.coll), rank_b,
                       CollTypeName(b.coll));
  } else if (a.dtype != b.dtype) {
    what = fmt::format("data type: rank {} sent {}, rank {} sent {}", rank_a, DataTypeName(a.dtype), rank_b,
                       DataTypeName(b.dtype));
    // float32 data travels as a 16-bit type where a rank asked for it (client/wire_narrowing.h).
    if ((a.dtype == DataType::kFloat32 && IsFloat32WireType(b.dtype)) ||
        (b.dtype == DataType::kFloat32 && IsFloat32WireType(a.dtype))) {
      what +=
          fmt::format(" (float32 data travels as {} where OPTCAST_WIRE_DTYPE asks for it: set it alike on every rank)",
                      DataTypeName(IsFloat32WireType(a.dtype) ? a.dtype : b.dtype));
    }
  } else if (a.count != b.count) {
    what = fmt::format("element count: rank {} sent {}, rank {} sent {}", rank_a, a.count, rank_b, b.count);
  } else if (a.op != b.op && a.coll != CollType::kAllGather) {
    what = fmt::format("reduction op: rank {} asked for {}, rank {} asked for {}", rank_a, RedOpName(a.op), rank_b,
                       RedOpName(b.op));
  } else {
    what = fmt::format(
        "striping: rank {} sends {} elements to this server, rank {} sends {}; give every rank the "
        "same server list in the same order",
        rank_a, a.server_elems, rank_b, b.server_elems);
  }
  return fmt::format(
      "ranks disagree on collective #{} in its {}; every rank must call the same collectives "
      "with the same arguments in the same order",
      a.coll_seq, what);
}

Status ValidateChunk(const wire::Chunk& chunk, uint32_t nranks, uint32_t sender_rank) {
  const wire::CollDesc& d = chunk.desc;
  const wire::ChunkRef& r = chunk.ref;
  const bool segmented = d.coll != CollType::kAllReduce;
  const uint64_t seg_len = d.count;
  if (d.count == 0) return ProtocolError(fmt::format("collective #{} has zero elements", d.coll_seq));
  if (d.count > (uint64_t{1} << 40)) {
    return ProtocolError(fmt::format("collective #{} claims {} elements; the limit is 2^40", d.coll_seq, d.count));
  }
  if (d.coll != CollType::kAllGather && !IsRedOpDefinedFor(d.op, d.dtype)) {
    return ProtocolError(fmt::format("collective #{}: {}", d.coll_seq, UndefinedRedOpMessage(d.op, d.dtype)));
  }
  if (segmented && r.segment >= nranks) {
    return ProtocolError(fmt::format("chunk of collective #{} names segment {} but the job has {} ranks", d.coll_seq,
                                     r.segment, nranks));
  }
  if (!segmented && r.segment != 0) {
    return ProtocolError(fmt::format("allreduce chunk of collective #{} names segment {}", d.coll_seq, r.segment));
  }
  if (d.coll == CollType::kAllGather && r.segment != sender_rank) {
    return ProtocolError(
        fmt::format("rank {} sent data for rank {}'s part of all-gather #{}", sender_rank, r.segment, d.coll_seq));
  }
  if (segmented && r.segment > UINT64_MAX / seg_len) {
    return ProtocolError(
        fmt::format("chunk of collective #{} names segment {}, beyond any buffer", d.coll_seq, r.segment));
  }
  const uint64_t seg_begin = segmented ? static_cast<uint64_t>(r.segment) * seg_len : 0;
  if (r.offset < seg_begin || r.offset - seg_begin > seg_len || r.count > seg_len - (r.offset - seg_begin)) {
    return ProtocolError(fmt::format("chunk [{}, +{}) lies outside collective #{} ({})", r.offset, r.count, d.coll_seq,
                                     DescribeColl(d)));
  }
  if (r.count > d.server_elems) {
    return ProtocolError(fmt::format("chunk of {} elements exceeds the {} this server handles in collective #{}",
                                     r.count, d.server_elems, d.coll_seq));
  }
  return Status::Ok();
}

}  // namespace optcast::server
