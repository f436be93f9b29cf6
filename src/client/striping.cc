// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/striping.h"

#include <algorithm>
#include <utility>

namespace optcast::client {

Striping::Striping(int nranks, int rank, bool failover, uint64_t chunk_bytes, uint64_t max_payload, uint64_t rate_bits,
                   const ChunkPolicy& chunks)
    : nranks_(nranks),
      rank_(rank),
      failover_(failover),
      chunk_bytes_(chunk_bytes),
      max_payload_(max_payload),
      rate_bits_(rate_bits),
      policy_(ForLinkRate(chunks, nranks, rate_bits)) {}

void Striping::Stripe(Request* req, const std::vector<uint32_t>& alive, uint32_t epoch,
                      std::vector<ServerLink>& links) const {
  const int nservers = static_cast<int>(alive.size());
  const CollType coll = req->desc.coll;
  const DataType dtype = req->desc.dtype;
  const uint64_t count = req->desc.count;
  const int used = ServersToUse(dtype, count, nservers, nranks_, rate_bits_);
  // Small collectives use fewer servers; rotating the first one spreads them over all.
  const int first = static_cast<int>(req->seq % static_cast<uint64_t>(nservers));
  const uint64_t chunk_elems = ChooseChunkElems(dtype, count, used, chunk_bytes_, max_payload_, policy_);
  req->desc.epoch = epoch;
  for (int j = 0; j < used; ++j) {
    ServerPlan plan = PlanForServer(coll, count, nranks_, rank_, used, j, chunk_elems);
    if (plan.server_elems == 0) continue;
    PendingSends ps{req, req->desc, std::move(plan.sends), 0, {}};
    ps.desc.server_elems = plan.server_elems;
    const uint32_t link = alive[static_cast<size_t>((first + j) % nservers)];
    if (failover_) AddPieces(req, ps.chunks, link);
    req->outstanding += plan.expected_replies;
    req->pending_link[link] += plan.expected_replies;
    // A server this rank saw die, which the job has not agreed on yet: its share waits for
    // the failover that moves it.
    if (!links[link].failed) links[link].queue.push_back(std::move(ps));
  }
  std::sort(req->pieces.begin(), req->pieces.end(),
            [](const Piece& a, const Piece& b) { return a.ref.offset < b.ref.offset; });
  req->planned = true;
}

void Striping::AddPieces(Request* req, const std::vector<wire::ChunkRef>& sends, uint32_t link) const {
  if (req->desc.coll != CollType::kAllGather) {
    for (const wire::ChunkRef& ref : sends) req->pieces.push_back(Piece{ref, req->seq, link, true, true});
    return;
  }
  const uint64_t count = req->desc.count;
  const uint64_t me = static_cast<uint64_t>(rank_);
  for (uint32_t seg = 0; seg < static_cast<uint32_t>(nranks_); ++seg) {
    for (wire::ChunkRef ref : sends) {
      ref.offset = ref.offset - me * count + seg * count;
      ref.segment = seg;
      req->pieces.push_back(Piece{ref, req->seq, link, true, true});
    }
  }
}

bool Striping::Sends(const Request& req, const wire::ChunkRef& ref) const {
  return req.desc.coll != CollType::kAllGather || ref.segment == static_cast<uint32_t>(rank_);
}

const uint8_t* Striping::ChunkSource(const Request& req, const wire::ChunkRef& ref, uint8_t flags) const {
  const uint64_t own_begin = static_cast<uint64_t>(rank_) * req.desc.count;
  switch (req.desc.coll) {
    case CollType::kAllReduce:
      return ((flags & wire::kChunkResultCopy) != 0 ? req.recv : req.send) + ref.offset * req.esize;
    case CollType::kReduceScatter:
      if ((flags & wire::kChunkResultCopy) != 0) return req.recv + (ref.offset - own_begin) * req.esize;
      if (ref.segment == static_cast<uint32_t>(rank_) && !req.own_input.empty()) {
        return req.own_input.data() + (ref.offset - own_begin) * req.esize;
      }
      return req.send + ref.offset * req.esize;
    case CollType::kAllGather: return req.send + (ref.offset - own_begin) * req.esize;
  }
  return req.send;
}

}  // namespace optcast::client
