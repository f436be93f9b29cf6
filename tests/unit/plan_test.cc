// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Striping and chunking arithmetic (client/plan.h), checked against independent definitions and
// against what the server accepts (server/job.h ValidateChunk).

#include "client/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/job.h"

namespace optcast::client {
namespace {

constexpr CollType kColls[] = {CollType::kAllReduce, CollType::kReduceScatter, CollType::kAllGather};

std::string Where(CollType coll, uint64_t count, int nranks, int rank, int nservers, int server, uint64_t ce) {
  return std::string(CollTypeName(coll)) + " count=" + std::to_string(count) + " nranks=" + std::to_string(nranks) +
         " rank=" + std::to_string(rank) + " nservers=" + std::to_string(nservers) +
         " server=" + std::to_string(server) + " chunk_elems=" + std::to_string(ce);
}

// ---- Shard ----

void CheckShards(uint64_t len, int parts) {
  uint64_t next = 0;
  uint64_t min_len = UINT64_MAX, max_len = 0;
  for (int j = 0; j < parts; ++j) {
    const Range r = Shard(len, parts, j);
    ASSERT_EQ(r.begin, next) << "len=" << len << " parts=" << parts << " j=" << j;
    next = r.begin + r.len;
    min_len = std::min(min_len, r.len);
    max_len = std::max(max_len, r.len);
    // The first len % parts shards are the longer ones.
    const uint64_t want = len / static_cast<uint64_t>(parts) + (static_cast<uint64_t>(j) < len % parts ? 1 : 0);
    ASSERT_EQ(r.len, want) << "len=" << len << " parts=" << parts << " j=" << j;
  }
  ASSERT_EQ(next, len) << "len=" << len << " parts=" << parts;
  ASSERT_LE(max_len - min_len, 1u) << "len=" << len << " parts=" << parts;
}

TEST(PlanShard, CoversRangeContiguouslyAndEvenly) {
  for (uint64_t len = 0; len <= 300; ++len) {
    for (int parts = 1; parts <= 17; ++parts) CheckShards(len, parts);
  }
  for (uint64_t len : {uint64_t{1} << 32, (uint64_t{1} << 40) + 7, uint64_t{1000003}, uint64_t{0xffffffff} * 3}) {
    for (int parts : {1, 2, 3, 7, 64}) CheckShards(len, parts);
  }
}

TEST(PlanShard, MorePartsThanElements) {
  for (int j = 0; j < 8; ++j) {
    const Range r = Shard(3, 8, j);
    EXPECT_EQ(r.len, j < 3 ? 1u : 0u);
    EXPECT_EQ(r.begin, static_cast<uint64_t>(std::min(j, 3)));
  }
}

// ---- ServersToUse ----

TEST(PlanServersToUse, SmallMessagesUseFewerServers) {
  for (int dt = 0; dt < kNumDataTypes; ++dt) {
    const auto dtype = static_cast<DataType>(dt);
    const uint64_t es = DataTypeSize(dtype);
    for (int nservers = 1; nservers <= 8; ++nservers) {
      int prev = 1;
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, kMinShardBytes / es - 1, kMinShardBytes / es,
                             2 * kMinShardBytes / es - 1, 2 * kMinShardBytes / es, 3 * kMinShardBytes / es + 5,
                             uint64_t{1} << 20, uint64_t{1} << 40}) {
        const int used = ServersToUse(dtype, count, nservers);
        const std::string where = std::string(DataTypeName(dtype)) + " count=" + std::to_string(count) +
                                  " nservers=" + std::to_string(nservers);
        ASSERT_GE(used, 1) << where;
        ASSERT_LE(used, nservers) << where;
        // Independent definition: one server per full 16 KiB, at least one, at most all.
        const uint64_t want = std::min<uint64_t>(nservers, std::max<uint64_t>(1, count * es / kMinShardBytes));
        EXPECT_EQ(static_cast<uint64_t>(used), want) << where;
        // Every server used gets at least kMinShardBytes, except when only one is used.
        if (used > 1) {
          EXPECT_GE(count * es / static_cast<uint64_t>(used), kMinShardBytes) << where;
        }
        // Monotone in the message size.
        EXPECT_GE(used, prev) << where;
        prev = used;
      }
    }
  }
}

// The floor by link rate, worked by hand: the shards of `nranks` ranks through one port in at
// most 1 ms, between 1 KiB and 8 KiB.
TEST(PlanServersToUse, TheFloorShrinksOnSlowPorts) {
  EXPECT_EQ(MinShardBytes(8, 0), 8192u);                     // unknown: the fixed floor
  EXPECT_EQ(MinShardBytes(8, 100'000'000'000ull), 8192u);    // 100 Gbit/s: per-message costs rule
  EXPECT_EQ(MinShardBytes(4, 500'000'000ull), 8192u);        // 62500 B / 4 ranks = 15625 > 8192
  EXPECT_EQ(MinShardBytes(8, 500'000'000ull), 7812u);        // 62500 / 8
  EXPECT_EQ(MinShardBytes(8, 200'000'000ull), 3125u);        // 25000 / 8
  EXPECT_EQ(MinShardBytes(8, 100'000'000ull), 1562u);        // 12500 / 8
  EXPECT_EQ(MinShardBytes(16, 500'000'000ull), 3906u);       // twice the ranks, half the floor
  EXPECT_EQ(MinShardBytes(8, 10'000'000ull), 1024u);         // 156 B: clamped to the smallest floor
  EXPECT_EQ(MinShardBytes(1024, 25'000'000'000ull), 3051u);  // 3125000 / 1024
  // 8 ranks, 8 servers at 100 Mbit/s: 4 KiB goes to 2 servers, 8 KiB to 5, 16 KiB to all 8;
  // with the port rate unknown, to 1, 1 and 2.
  EXPECT_EQ(ServersToUse(DataType::kFloat32, 1024, 8, 8, 100'000'000ull), 2);
  EXPECT_EQ(ServersToUse(DataType::kFloat32, 2048, 8, 8, 100'000'000ull), 5);
  EXPECT_EQ(ServersToUse(DataType::kFloat32, 4096, 8, 8, 100'000'000ull), 8);
  EXPECT_EQ(ServersToUse(DataType::kFloat32, 1024, 8, 8, 0), 1);
  EXPECT_EQ(ServersToUse(DataType::kFloat32, 2048, 8, 8, 0), 1);
  EXPECT_EQ(ServersToUse(DataType::kFloat32, 4096, 8, 8, 0), 2);
  // At 500 Mbit/s the same as the fixed floor from 8 to 64 KiB.
  for (uint64_t count : {2048ull, 4096ull, 8192ull, 16384ull}) {
    EXPECT_EQ(ServersToUse(DataType::kFloat32, count, 8, 8, 500'000'000ull), ServersToUse(DataType::kFloat32, count, 8))
        << count;
  }
  // Never more servers on a faster port, never fewer with more ranks.
  for (uint64_t bytes : {1024ull, 4096ull, 16384ull, 65536ull}) {
    int prev_rate = 8;
    for (uint64_t rate : {10'000'000ull, 100'000'000ull, 1'000'000'000ull, 100'000'000'000ull}) {
      const int used = ServersToUse(DataType::kUInt8, bytes, 8, 8, rate);
      EXPECT_LE(used, prev_rate) << bytes << " B at " << rate;
      prev_rate = used;
    }
    int prev_ranks = 1;
    for (int nranks : {1, 4, 16, 64, 256}) {
      const int used = ServersToUse(DataType::kUInt8, bytes, 8, nranks, 200'000'000ull);
      EXPECT_GE(used, prev_ranks) << bytes << " B, " << nranks << " ranks";
      prev_ranks = used;
    }
  }
}

TEST(PlanServersToUse, LargeMessagesUseEveryServer) {
  for (int nservers : {1, 2, 3, 16, 64}) {
    EXPECT_EQ(ServersToUse(DataType::kFloat32, uint64_t{64} << 20, nservers), nservers);
    EXPECT_EQ(ServersToUse(DataType::kUInt8, uint64_t{1} << 40, nservers), nservers);
  }
}

// ---- ForLinkRate ----

// A round of 8 ranks' chunks through a port in at most 5 ms, to the nearest 4 KiB, worked by hand.
TEST(PlanForLinkRate, ChunksShrinkOnSlowPortsOnly) {
  auto cap = [](const ChunkPolicy& p, int nranks, uint64_t bits) { return ForLinkRate(p, nranks, bits).max_bytes; };
  EXPECT_EQ(cap(kStreamChunks, 8, 0), kStreamChunkBytes);                   // unknown: unchanged
  EXPECT_EQ(cap(kStreamChunks, 8, 100'000'000'000ull), kStreamChunkBytes);  // fast: unchanged
  EXPECT_EQ(cap(kStreamChunks, 8, 500'000'000ull), kStreamChunkBytes);      // 39062 B: above 32 KiB
  EXPECT_EQ(cap(kStreamChunks, 8, 200'000'000ull), 16384u);                 // 15625 -> 16 KiB
  EXPECT_EQ(cap(kStreamChunks, 8, 100'000'000ull), 8192u);                  // 7812 -> 8 KiB
  EXPECT_EQ(cap(kStreamChunks, 4, 100'000'000ull), 16384u);                 // 15625 -> 16 KiB
  EXPECT_EQ(cap(kStreamChunks, 8, 1'000'000ull), 4096u);                    // 78 B: at least 4 KiB
  // The policy's floor never exceeds its cap; fabrics' larger chunks shrink the same way.
  const ChunkPolicy fab = ForLinkRate(kFabricChunks, 8, 100'000'000ull);
  EXPECT_EQ(fab.max_bytes, 8192u);
  EXPECT_EQ(fab.min_bytes, 8192u);
  EXPECT_EQ(ForLinkRate(kFabricChunks, 8, 100'000'000'000ull).min_bytes, kFabricChunks.min_bytes);
  const ChunkPolicy tree = ForLinkRate(kTreeStreamChunks, 8, 200'000'000ull);
  EXPECT_EQ(tree.min_bytes, 16384u);
  EXPECT_EQ(tree.max_bytes, 16384u);
  // And the chunk a 1 MiB float32 AllReduce on 8 servers gets: 8 KiB at 100 Mbit/s.
  EXPECT_EQ(ChooseChunkElems(DataType::kFloat32, (uint64_t{1} << 20) / 4, 8, 0, 64u << 20,
                             ForLinkRate(kStreamChunks, 8, 100'000'000ull)),
            2048u);
}

// ---- ChooseChunkElems ----

TEST(PlanChunkElems, OverrideWins) {
  for (int dt = 0; dt < kNumDataTypes; ++dt) {
    const auto dtype = static_cast<DataType>(dt);
    const uint64_t es = DataTypeSize(dtype);
    for (size_t ov : {size_t{1}, size_t{3}, size_t{8}, size_t{1000}, size_t{4096}, size_t{1} << 20, size_t{5} << 20}) {
      for (uint64_t count : {uint64_t{1}, uint64_t{1000}, uint64_t{1} << 30}) {
        const uint64_t got = ChooseChunkElems(dtype, count, 2, ov, 64u << 20);
        EXPECT_EQ(got, std::max<uint64_t>(1, ov / es)) << DataTypeName(dtype) << " override=" << ov;
      }
    }
  }
}

TEST(PlanChunkElems, MaxPayloadCaps) {
  for (int dt = 0; dt < kNumDataTypes; ++dt) {
    const auto dtype = static_cast<DataType>(dt);
    const uint64_t es = DataTypeSize(dtype);
    for (uint64_t maxp :
         {uint64_t{1}, uint64_t{7}, uint64_t{4096}, uint64_t{30000}}) {  // all below the automatic floor
      // Override above the cap.
      EXPECT_EQ(ChooseChunkElems(dtype, 1 << 20, 1, 1u << 30, maxp), std::max<uint64_t>(1, maxp / es));
      // Automatic choice above the cap.
      const uint64_t got = ChooseChunkElems(dtype, uint64_t{1} << 30, 1, 0, maxp);
      EXPECT_EQ(got, std::max<uint64_t>(1, maxp / es)) << DataTypeName(dtype) << " max_payload=" << maxp;
      EXPECT_GE(got, 1u);
      if (maxp >= es) {
        EXPECT_LE(got * es, maxp);
      }
    }
  }
}

TEST(PlanChunkElems, AlwaysAtLeastOne) {
  for (int dt = 0; dt < kNumDataTypes; ++dt) {
    const auto dtype = static_cast<DataType>(dt);
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{5}}) {
      for (size_t ov : {size_t{0}, size_t{1}}) {
        for (uint64_t maxp : {uint64_t{0}, uint64_t{1}, uint64_t{64u << 20}}) {
          EXPECT_GE(ChooseChunkElems(dtype, count, 3, ov, maxp), 1u);
        }
      }
    }
  }
}

TEST(PlanChunkElems, StreamPolicyCuts32KiBChunksWithoutASmallLastOneAndShortShardsInTwo) {
  const uint64_t big_payload = 64u << 20;
  for (int dt = 0; dt < kNumDataTypes; ++dt) {
    const auto dtype = static_cast<DataType>(dt);
    const uint64_t es = DataTypeSize(dtype);
    for (uint64_t c = 1; c < (uint64_t{1} << 34); c = c * 3 + 1) {
      for (int ns : {1, 2, 3, 5, 8}) {
        // Whole elements of at most 32 KiB. A shard of more than 64 KiB: as many chunks as 32 KiB
        // ones would take; no last chunk under half the others (one element per chunk aside),
        // and chunks of 32 KiB (but for an element) unless that was what it took. Of 16-64 KiB:
        // two chunks. Of at most 16 KiB: one.
        const uint64_t elems = ChooseChunkElems(dtype, c, ns, 0, big_payload);
        const uint64_t bytes = elems * es;
        for (int server = 0; server < ns; ++server) {
          const uint64_t shard_elems = Shard(c, ns, server).len;
          const uint64_t shard = shard_elems * es;
          const uint64_t chunks = (shard_elems + elems - 1) / elems;
          const std::string where = std::string(DataTypeName(dtype)) + " count=" + std::to_string(c) +
                                    " servers=" + std::to_string(ns) + " server=" + std::to_string(server);
          EXPECT_LE(bytes, 32u << 10) << where;
          if (shard > (64u << 10)) {
            EXPECT_EQ(chunks, (shard + (32u << 10) - 1) / (32u << 10)) << where;
            const uint64_t last = shard_elems - (chunks - 1) * elems;
            EXPECT_GE(2 * (last + chunks), elems)
                << where << ": a last chunk of " << last << " elements after " << elems;
            if (server == 0 && 2 * (shard % (32u << 10)) >= (32u << 10)) {
              EXPECT_GT(bytes + es, 32u << 10) << where;
            }
          } else if (shard > (16u << 10) && server == 0) {
            EXPECT_EQ(chunks, 2u) << where;
          } else if (shard <= (16u << 10)) {
            EXPECT_LE(chunks, 1u) << where;
          }
        }
      }
    }
  }
  const auto f32 = DataType::kFloat32;
  EXPECT_EQ(ChooseChunkElems(f32, (uint64_t{1} << 20) / 4, 8, 0, big_payload), 8192u) << "1 MiB on 8 servers";
  EXPECT_EQ(ChooseChunkElems(f32, (uint64_t{256} << 20) / 4, 2, 0, big_payload), 8192u) << "256 MiB on 2 servers";
  EXPECT_EQ(ChooseChunkElems(f32, (uint64_t{256} << 20) / 4, 2, 0, 16 << 10), 4096u) << "the servers' cap wins";
  EXPECT_EQ(ChooseChunkElems(f32, (uint64_t{1056} << 10) / 4, 8, 0, big_payload), 6759u)
      << "1056 KiB on 8: shards of 132 KiB in 5 chunks of 26.4 KiB, not 4 x 32 KiB and 4 KiB";
  EXPECT_EQ(
      ChooseChunkElems(f32, (uint64_t{1} << 20) / 4, 8, 0, big_payload, ForLinkRate(kStreamChunks, 8, 300'000'000ull)),
      5462u)
      << "1 MiB on 8 at 300 Mbit/s (24 KiB cap): 6 chunks of 21.3 KiB, not 5 x 24 KiB and 8 KiB";
  EXPECT_EQ(ChooseChunkElems(f32, (uint64_t{512} << 10) / 4, 8, 0, big_payload,
                             ForLinkRate(kStreamChunks, 8, 300'000'000ull)),
            6144u)
      << "512 KiB on 8 at 300 Mbit/s: 24, 24 and 16 KiB stay";
  EXPECT_EQ(ChooseChunkElems(f32, (uint64_t{256} << 10) / 4, 8, 0, big_payload), 4096u) << "256 KiB on 8: 2 x 16 KiB";
  EXPECT_EQ(ChooseChunkElems(f32, (uint64_t{128} << 10) / 4, 8, 0, big_payload), 4096u) << "128 KiB on 8: one";
}

TEST(PlanChunkElems, TreePolicyCutsA128thOfTheStripeBetween16And32KiB) {
  const uint64_t big_payload = 64u << 20;
  const auto f32 = DataType::kFloat32;
  auto chunk_bytes = [&](uint64_t message_bytes, int stripes) {
    return ChooseChunkElems(f32, message_bytes / 4, stripes, 0, big_payload, kTreeStreamChunks) * 4;
  };
  EXPECT_EQ(chunk_bytes(uint64_t{64} << 20, 32), 16u << 10) << "1024 workers, 32 trees: 2 MiB stripes in 128";
  EXPECT_EQ(chunk_bytes(uint64_t{12} << 20, 4), 24u << 10) << "3 MiB stripes";
  EXPECT_EQ(chunk_bytes(uint64_t{16} << 20, 4), 32u << 10) << "4 MiB stripes";
  EXPECT_EQ(chunk_bytes(uint64_t{64} << 20, 2), 32u << 10) << "32 MiB stripes: capped";
  EXPECT_EQ(chunk_bytes(uint64_t{1} << 20, 2), 16u << 10) << "the floor";
  EXPECT_EQ(chunk_bytes(4096, 2), 16u << 10) << "a small message is one chunk of the floor";
  // Flat servers cut the same 2 MiB stripes into 32 KiB.
  EXPECT_EQ(ChooseChunkElems(f32, (uint64_t{64} << 20) / 4, 32, 0, big_payload) * 4, kStreamChunkBytes);
}

TEST(PlanChunkElems, FabricPolicyCutsAQuarterOfTheShardBetween256KiBAnd1MiB) {
  const uint64_t big_payload = 64u << 20;
  const auto f32 = DataType::kFloat32;
  auto chunk_bytes = [&](uint64_t message_bytes, int nservers) {
    return ChooseChunkElems(f32, message_bytes / 4, nservers, 0, big_payload, kFabricChunks) * 4;
  };
  EXPECT_EQ(chunk_bytes(4096, 2), 256u << 10) << "a small message is one chunk of the floor";
  EXPECT_EQ(chunk_bytes(uint64_t{4} << 20, 2), 512u << 10) << "4 MiB over 2 servers: a quarter of 2 MiB";
  EXPECT_EQ(chunk_bytes(uint64_t{6} << 20, 2), 768u << 10);
  EXPECT_EQ(chunk_bytes(uint64_t{256} << 20, 2), 1u << 20) << "capped at 1 MiB";
  EXPECT_EQ(ChooseChunkElems(f32, uint64_t{256} << 20, 2, 4096, big_payload, kFabricChunks), 1024u)
      << "an override still wins";
  EXPECT_EQ(ChooseChunkElems(f32, uint64_t{256} << 20, 2, 0, 64 << 10, kFabricChunks), (64u << 10) / 4)
      << "and the servers' max payload still caps";
  // The stream policy is the default and unchanged.
  EXPECT_EQ(ChooseChunkElems(f32, uint64_t{256} << 20, 2, 0, big_payload), kStreamChunkBytes / 4);
}

TEST(PlanChunkElems, ChunkCountFitsTheWireField) {
  // ChunkRef::count is 32 bits: whatever the override and the servers' max_payload, a chunk must
  // not hold more elements than the field can carry.
  const uint64_t elems = ChooseChunkElems(DataType::kUInt8, uint64_t{1} << 36, 1, size_t{1} << 34, UINT64_MAX);
  EXPECT_LE(elems, uint64_t{UINT32_MAX});
}

// ---- PlanForServer ----

// Independent reference of the chunk cut: the segments a rank contributes to one server.
std::vector<uint32_t> SegmentsSent(CollType coll, int nranks, int rank) {
  switch (coll) {
    case CollType::kAllReduce: return {0};
    case CollType::kReduceScatter: {
      std::vector<uint32_t> s;
      for (int r = 0; r < nranks; ++r) s.push_back(static_cast<uint32_t>(r));
      return s;
    }
    case CollType::kAllGather: return {static_cast<uint32_t>(rank)};
  }
  return {};
}

void CheckPlans(CollType coll, uint64_t count, int nranks, int nservers, uint64_t ce) {
  // plans[server][rank]
  std::vector<std::vector<ServerPlan>> plans(nservers, std::vector<ServerPlan>(nranks));
  for (int j = 0; j < nservers; ++j) {
    for (int r = 0; r < nranks; ++r) plans[j][r] = PlanForServer(coll, count, nranks, r, nservers, j, ce);
  }
  for (int r = 0; r < nranks; ++r) {
    // Union over servers of rank r's chunks, per segment.
    std::vector<std::pair<uint64_t, uint64_t>> chunks;  // (offset, count)
    for (int j = 0; j < nservers; ++j) {
      const ServerPlan& p = plans[j][r];
      const std::string where = Where(coll, count, nranks, r, nservers, j, ce);
      ASSERT_EQ(p.server_elems, plans[j][0].server_elems) << where;
      if (p.server_elems == 0) {
        EXPECT_TRUE(p.sends.empty()) << where;
        EXPECT_EQ(p.expected_replies, 0u) << where;
      }
      uint64_t own_elems = 0;
      for (const auto& c : p.sends) {
        ASSERT_GT(c.count, 0u) << where;
        ASSERT_LE(c.count, ce) << where;
        // Never straddles a segment.
        const uint64_t seg_begin = coll == CollType::kAllReduce ? 0 : uint64_t{c.segment} * count;
        if (coll == CollType::kAllReduce) {
          ASSERT_EQ(c.segment, 0u) << where;
        }
        if (coll == CollType::kAllGather) {
          ASSERT_EQ(c.segment, static_cast<uint32_t>(r)) << where;
        }
        ASSERT_LT(c.segment, static_cast<uint32_t>(std::max(nranks, 1))) << where;
        ASSERT_GE(c.offset, seg_begin) << where;
        ASSERT_LE(c.offset + c.count, seg_begin + count) << where;
        chunks.emplace_back(c.offset, c.count);
        own_elems += c.count;
        // The server accepts every chunk a correct client cuts.
        wire::Chunk wc;
        wc.desc.coll = coll;
        wc.desc.count = count;
        wc.desc.server_elems = p.server_elems;
        wc.ref = c;
        Status st = server::ValidateChunk(wc, static_cast<uint32_t>(nranks), static_cast<uint32_t>(r));
        ASSERT_TRUE(st.ok()) << where << ": " << st.message();
      }
      // Every rank sends its chunks in the same order (sorted by offset).
      for (size_t i = 1; i < p.sends.size(); ++i) ASSERT_LT(p.sends[i - 1].offset, p.sends[i].offset) << where;
      // AllReduce / ReduceScatter: every rank cuts identical chunks.
      if (coll != CollType::kAllGather) {
        ASSERT_EQ(p.sends.size(), plans[j][0].sends.size()) << where;
        for (size_t i = 0; i < p.sends.size(); ++i) {
          ASSERT_EQ(p.sends[i].offset, plans[j][0].sends[i].offset) << where;
          ASSERT_EQ(p.sends[i].count, plans[j][0].sends[i].count) << where;
          ASSERT_EQ(p.sends[i].segment, plans[j][0].sends[i].segment) << where;
        }
      }
      // server_elems is what the server will see completed, summed over all ranks' slots.
      uint64_t slot_elems = 0;
      if (coll == CollType::kAllGather) {
        for (int q = 0; q < nranks; ++q)
          for (const auto& c : plans[j][q].sends) slot_elems += c.count;
      } else {
        slot_elems = own_elems;
      }
      ASSERT_EQ(p.server_elems, slot_elems) << where;
      // Replies, from the server's side: every slot answers each rank once (result or ack); for
      // all-gather rank r hears about its own chunks (acks) and every other rank's (results).
      uint64_t replies = 0;
      if (coll == CollType::kAllGather) {
        for (int q = 0; q < nranks; ++q) replies += plans[j][q].sends.size();
      } else {
        replies = p.sends.size();
      }
      ASSERT_EQ(p.expected_replies, replies) << where;
    }
    // Coverage: exactly the logical range of each segment, once.
    std::sort(chunks.begin(), chunks.end());
    const std::vector<uint32_t> segs = SegmentsSent(coll, nranks, r);
    size_t k = 0;
    for (uint32_t s : segs) {
      const uint64_t begin = coll == CollType::kAllReduce ? 0 : uint64_t{s} * count;
      uint64_t next = begin;
      while (k < chunks.size() && chunks[k].first < begin + count) {
        ASSERT_EQ(chunks[k].first, next) << Where(coll, count, nranks, r, nservers, -1, ce) << " segment " << s;
        next += chunks[k].second;
        ++k;
      }
      ASSERT_EQ(next, begin + count) << Where(coll, count, nranks, r, nservers, -1, ce) << " segment " << s;
    }
    ASSERT_EQ(k, chunks.size()) << Where(coll, count, nranks, r, nservers, -1, ce);
  }
}

TEST(PlanForServer, CoversLogicalRangeForEveryShape) {
  for (CollType coll : kColls) {
    for (uint64_t count : {1, 2, 3, 5, 7, 16, 31, 100, 257}) {
      for (int nranks = 1; nranks <= 5; ++nranks) {
        for (int nservers = 1; nservers <= 4; ++nservers) {
          for (uint64_t ce : {1, 2, 3, 7, 64, 1000}) {
            CheckPlans(coll, count, nranks, nservers, ce);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(PlanForServer, CoversLogicalRangeWithRealChunkSizes) {
  // Counts and chunk sizes as the communicator picks them, including several chunks per shard.
  for (CollType coll : kColls) {
    for (uint64_t count : {uint64_t{1000003}, uint64_t{1} << 20, uint64_t{3} << 22}) {
      for (int nranks : {1, 3, 4}) {
        for (int nservers : {1, 2, 3}) {
          const uint64_t ce = ChooseChunkElems(DataType::kFloat32, count, nservers, 0, 64u << 20);
          CheckPlans(coll, count, nranks, nservers, ce);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(PlanForServer, HugeCountBeyond32Bits) {
  // Chunk offsets are 64-bit even though chunk counts are 32-bit.
  const uint64_t count = (uint64_t{1} << 32) + 5;
  CheckPlans(CollType::kAllReduce, count, 2, 3, uint64_t{1} << 18);
  CheckPlans(CollType::kAllGather, count, 2, 2, uint64_t{1} << 20);
}

TEST(PlanForServer, ZeroCountPlansNothing) {
  for (CollType coll : kColls) {
    for (int j = 0; j < 3; ++j) {
      const ServerPlan p = PlanForServer(coll, 0, 4, 1, 3, j, 16);
      EXPECT_EQ(p.server_elems, 0u);
      EXPECT_TRUE(p.sends.empty());
      EXPECT_EQ(p.expected_replies, 0u);
    }
  }
}

TEST(PlanForServer, ExpectedRepliesMatchesDefinition) {
  // plan.cc: allreduce and reduce-scatter answer every chunk sent; all-gather also delivers every
  // other rank's chunks of the shard.
  const uint64_t count = 1001, ce = 10;
  const int nranks = 4, nservers = 3;
  for (int j = 0; j < nservers; ++j) {
    const uint64_t shard = Shard(count, nservers, j).len;
    const uint64_t per_shard = (shard + ce - 1) / ce;
    for (int r = 0; r < nranks; ++r) {
      EXPECT_EQ(PlanForServer(CollType::kAllReduce, count, nranks, r, nservers, j, ce).expected_replies, per_shard);
      EXPECT_EQ(PlanForServer(CollType::kReduceScatter, count, nranks, r, nservers, j, ce).expected_replies,
                per_shard * nranks);
      const ServerPlan ag = PlanForServer(CollType::kAllGather, count, nranks, r, nservers, j, ce);
      EXPECT_EQ(ag.sends.size(), per_shard);
      EXPECT_EQ(ag.expected_replies, ag.sends.size() + per_shard * (nranks - 1));
    }
  }
}

TEST(PlanForServer, ChunkCountNeverTruncatedTo32Bits) {
  // A chunk size above 2^32 elements must not wrap the 32-bit ChunkRef::count.
  const uint64_t count = (uint64_t{1} << 32) + 5;
  const ServerPlan p = PlanForServer(CollType::kAllReduce, count, 1, 0, 1, 0, uint64_t{1} << 33);
  uint64_t covered = 0;
  for (const auto& c : p.sends) covered += c.count;
  EXPECT_EQ(covered, count);
}

}  // namespace
}  // namespace optcast::client
