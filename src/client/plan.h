// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// How a collective is striped over servers and cut into chunks. Pure arithmetic, identical on
// every rank for the same arguments, so all ranks cut the same chunks.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/shard.h"
#include "optcast/types.h"
#include "wire/protocol.h"

namespace optcast::client {

using optcast::Range;
using optcast::Shard;

// How many of the `nservers` servers a collective of `count` elements (per segment) is striped
// over: all of them, except that a small message keeps at least MinShardBytes() per server, since
// splitting a few bytes over many servers adds hops and wake-ups without adding bandwidth.
// Each server's port carries every rank's shard, so a floor much above a few packets makes that
// port the bottleneck: with 8 ranks at 500 Mbit/s a 32 KiB AllReduce on 2 servers (16 KiB floor)
// took 1.75 ms, on 4 servers 1.08 ms, on 8 (4 KiB shards, more wake-ups) 1.7 ms
// (docs/benchmarks.md, "Small and mid-size messages after failover").
inline constexpr uint64_t kMinShardBytes = 8 * 1024;
// On a slow port the port's time is what costs, not the wake-ups: the floor shrinks so that the
// `nranks` shards a server's port carries for one small collective pass in at most this long.
// At 500 Mbit/s and 8 ranks that is 7.8 KiB, the fixed floor measured best there; at 100 Mbit/s
// 1.5 KiB, which took 8 and 16 KiB AllReduces from 2.4 and 3.6 MB/s to 8.7 and 11 (the ring:
// 5.4-6.6); at 200 Mbit/s / MTU 9000 no size moved beyond the spread (docs/benchmarks.md,
// "Small collectives and the link rate").
inline constexpr double kSmallCollectivePortSeconds = 1.0e-3;
// Never below this: a shard smaller than a frame saves no port time.
inline constexpr uint64_t kMinShardBytesSlowLink = 1024;
// The floor for a job of `nranks` ranks whose servers' ports run at `link_rate_bits` bit/s (the
// slowest the servers announced; 0: unknown, then kMinShardBytes). The same on every rank: all
// ranks hear the same servers.
uint64_t MinShardBytes(int nranks, uint64_t link_rate_bits);
int ServersToUse(DataType dtype, uint64_t count, int nservers, int nranks = 1, uint64_t link_rate_bits = 0);

// How a transport wants a shard cut: a `shard_divisor`th of it, between `min_bytes` and
// `max_bytes`, so a large message is pipelined and a small one is one chunk.
struct ChunkPolicy {
  uint64_t min_bytes;
  uint64_t max_bytes;
  uint64_t shard_divisor;
};
// Byte streams (tcp): chunks of 32 KiB, except that a shard of up to 64 KiB is cut in two (of at
// least 16 KiB): a shard of one chunk has no overlap at all, its result starting back only once
// every rank's whole shard is in, and a round trip of one chunk per server loses to a ring, which
// moves 2(n-1)/n of the buffer where this moves 2. A 256 KiB AllReduce on 8 servers at 500
// Mbit/s / MTU 1500 went from 36 MB/s (1.07x the ring) to 44.5 (1.31x) in two 16 KiB chunks per
// server (docs/benchmarks.md, "A shard of one chunk"). Each round of chunks through a server's
// port is what filling and draining the pipeline costs, so smaller chunks shorten both ends, while
// every chunk costs a send, a wake-up and a reduction call on each side. On the emulated cluster
// (8 workers, 8 servers, links without burst) 32 KiB beat 64 KiB at every size from 4 to 64 MiB,
// at 500 Mbit/s / MTU 1500 and at 200 Mbit/s / MTU 9000 (8 MiB: 79-82% of the bound against
// 72-74%, and 90% against 77%), and beat 16-24 KiB at 500 Mbit/s, where the machine's CPU is the
// limit (docs/benchmarks.md, "Chunk size at every size").
inline constexpr uint64_t kStreamChunkBytes = 32 * 1024;
inline constexpr ChunkPolicy kStreamChunks{kStreamChunkBytes / 2, kStreamChunkBytes, 2};
// Aggregation trees over byte streams: a chunk crosses a leaf and then a root, which waits for
// that chunk index from all its members before it answers, so filling and draining the two
// levels costs several rounds of a stripe. More, smaller chunks per stripe keep that share small
// (docs/scale.md, "Chunks in a tree"): at 1024 workers a leaf's 2 MiB stripe goes from 32 chunks
// (of 64 KiB, the flat servers' chunk then) to 128, and on the emulated cluster a depth-2 tree at
// 500 Mbit/s went from 51-63% of its bound with 64 KiB chunks to 91-94% with 32 KiB or 16 KiB, at
// 16 and 64 MiB.
inline constexpr ChunkPolicy kTreeStreamChunks{16 * 1024, 32 * 1024, 128};
// Fabrics (ofi): every message pays a completion and, above the provider's eager size, a
// rendezvous round trip, so fewer, larger chunks (docs/benchmarks.md, "chunk size over ofi").
inline constexpr ChunkPolicy kFabricChunks{256 * 1024, 1024 * 1024, 4};

// On a slow port a round of chunks through it (one from each of `nranks` ranks) takes long, and
// that round is what filling and draining the pipeline costs: chunks shrink so that a round takes
// at most this long, to the nearest 4 KiB and at least 4 KiB. Chunks per second per port stay the
// same, and so does what chunks cost in wake-ups. With 8 ranks: 32 KiB from 500 Mbit/s up (the
// stream size, unchanged), 16 KiB at 200 Mbit/s, 8 KiB at 100 Mbit/s, which took 256 KiB from 55-57%
// of the bound to 84-87% (docs/benchmarks.md, "Small collectives and the link rate").
inline constexpr double kChunkRoundPortSeconds = 5.0e-3;
// `policy` with its sizes capped for ports of `link_rate_bits` (0: unknown, no cap).
ChunkPolicy ForLinkRate(const ChunkPolicy& policy, int nranks, uint64_t link_rate_bits);

// Elements per chunk: `override_bytes` > 0 wins; otherwise `policy`'s share of the largest shard,
// evened out where that would leave a last chunk of less than half the others: as many chunks,
// all of one size (the last one at most a few elements short).
uint64_t ChooseChunkElems(DataType dtype, uint64_t count, int nservers, size_t override_bytes, uint64_t max_payload,
                          const ChunkPolicy& policy = kStreamChunks);

// How many chunks are in flight per server connection: client/send_window.h.

// What one rank does with one server for one collective.
struct ServerPlan {
  uint64_t server_elems = 0;          // elements the server handles (agreed by all ranks)
  std::vector<wire::ChunkRef> sends;  // chunks this rank contributes, in order
  uint64_t expected_replies = 0;      // results + acks this rank will receive
};

ServerPlan PlanForServer(CollType coll, uint64_t count, int nranks, int rank, int nservers, int server,
                         uint64_t chunk_elems);

}  // namespace optcast::client
