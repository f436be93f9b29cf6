// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/plan.h"

#include <algorithm>
#include <cmath>

namespace optcast::client {
namespace {

// Each rank's share of what a port of `link_rate_bits` carries in `seconds`.
double PortBytesPerRank(int nranks, uint64_t link_rate_bits, double seconds) {
  return static_cast<double>(link_rate_bits) / 8.0 * seconds / static_cast<double>(nranks);
}

}  // namespace

uint64_t MinShardBytes(int nranks, uint64_t link_rate_bits) {
  if (link_rate_bits == 0 || nranks <= 0) return kMinShardBytes;
  const double per_rank = PortBytesPerRank(nranks, link_rate_bits, kSmallCollectivePortSeconds);
  if (per_rank >= static_cast<double>(kMinShardBytes)) return kMinShardBytes;
  return std::max<uint64_t>(kMinShardBytesSlowLink, static_cast<uint64_t>(per_rank));
}

int ServersToUse(DataType dtype, uint64_t count, int nservers, int nranks, uint64_t link_rate_bits) {
  const uint64_t bytes = count * DataTypeSize(dtype);
  const uint64_t by_size = std::max<uint64_t>(1, bytes / MinShardBytes(nranks, link_rate_bits));
  return static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(nservers), by_size));
}

ChunkPolicy ForLinkRate(const ChunkPolicy& policy, int nranks, uint64_t link_rate_bits) {
  if (link_rate_bits == 0 || nranks <= 0) return policy;
  const double per_rank = PortBytesPerRank(nranks, link_rate_bits, kChunkRoundPortSeconds);
  constexpr double kUnit = 4096;
  const uint64_t cap = static_cast<uint64_t>(std::max(1.0, std::round(per_rank / kUnit)) * kUnit);
  ChunkPolicy capped = policy;
  capped.max_bytes = std::min(policy.max_bytes, cap);
  capped.min_bytes = std::min(policy.min_bytes, capped.max_bytes);
  return capped;
}

uint64_t ChooseChunkElems(DataType dtype, uint64_t count, int nservers, size_t override_bytes, uint64_t max_payload,
                          const ChunkPolicy& policy) {
  const uint64_t esize = DataTypeSize(dtype);
  uint64_t bytes;
  if (override_bytes > 0) {
    bytes = override_bytes;
  } else {
    // Many small chunks keep the pipeline short at both ends of a collective (the first result
    // returns early, the last uploads are not followed by a long tail of results), while the
    // policy's floor keeps per-message costs small.
    const uint64_t shard_elems = Shard(count, nservers, 0).len;
    const uint64_t shard_bytes = shard_elems * esize;
    bytes = std::clamp<uint64_t>((shard_bytes / policy.shard_divisor + 4095) / 4096 * 4096, policy.min_bytes,
                                 policy.max_bytes);
    // Cut at that size, a shard ends in a remainder. A last chunk of less than half the others
    // cost up to 15 points of the bound at 1 MiB (docs/benchmarks.md, "A small last chunk"), one
    // of half or more did not: then the shard is cut into as many chunks, all of one size.
    const uint64_t remainder = shard_bytes % bytes;
    if (bytes < max_payload && shard_bytes > bytes && remainder != 0 && remainder < bytes / 2) {
      const uint64_t chunks = (shard_bytes + bytes - 1) / bytes;
      return std::clamp<uint64_t>((shard_elems + chunks - 1) / chunks, 1, UINT32_MAX);
    }
  }
  bytes = std::min<uint64_t>(bytes, max_payload);
  // The wire carries a chunk's element count in 32 bits.
  return std::clamp<uint64_t>(bytes / esize, 1, UINT32_MAX);
}

ServerPlan PlanForServer(CollType coll, uint64_t count, int nranks, int rank, int nservers, int server,
                         uint64_t chunk_elems) {
  ServerPlan plan;
  chunk_elems = std::clamp<uint64_t>(chunk_elems, 1, UINT32_MAX);  // 32-bit count on the wire
  const Range shard = Shard(count, nservers, server);
  auto add_chunks = [&](uint32_t segment, uint64_t seg_begin) {
    for (uint64_t off = 0; off < shard.len; off += chunk_elems) {
      wire::ChunkRef ref;
      ref.segment = segment;
      ref.offset = seg_begin + shard.begin + off;
      ref.count = static_cast<uint32_t>(std::min(chunk_elems, shard.len - off));
      plan.sends.push_back(ref);
    }
  };
  const uint64_t chunks_per_shard = shard.len == 0 ? 0 : (shard.len + chunk_elems - 1) / chunk_elems;
  switch (coll) {
    case CollType::kAllReduce:
      plan.server_elems = shard.len;
      add_chunks(0, 0);
      plan.expected_replies = plan.sends.size();
      break;
    case CollType::kReduceScatter:
      plan.server_elems = shard.len * static_cast<uint64_t>(nranks);
      for (int s = 0; s < nranks; ++s) add_chunks(static_cast<uint32_t>(s), static_cast<uint64_t>(s) * count);
      plan.expected_replies = plan.sends.size();
      break;
    case CollType::kAllGather:
      plan.server_elems = shard.len * static_cast<uint64_t>(nranks);
      add_chunks(static_cast<uint32_t>(rank), static_cast<uint64_t>(rank) * count);
      plan.expected_replies = plan.sends.size() + chunks_per_shard * static_cast<uint64_t>(nranks - 1);
      break;
  }
  return plan;
}

}  // namespace optcast::client
