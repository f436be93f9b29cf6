// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The server's reduction threads: the same collectives with the event loop reducing alone and
// with several workers reducing chunks concurrently, checked against the reference and
// bitwise equal across ranks and thread counts.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checks.h"
#include "harness.h"

namespace optcast::e2e {
namespace {

struct Case {
  DataType dtype;
  RedOp op;
  size_t count;
};

// Sizes from one small chunk (reduced on the loop) to many chunks in flight at once (handed
// to the workers), over types whose kernels differ.
constexpr Case kCases[] = {{DataType::kFloat32, RedOp::kSum, 1000003}, {DataType::kFloat16, RedOp::kSum, 300001},
                           {DataType::kBFloat16, RedOp::kAvg, 200003}, {DataType::kInt32, RedOp::kMax, 150001},
                           {DataType::kFloat64, RedOp::kProd, 70001},  {DataType::kInt64, RedOp::kSum, 9},
                           {DataType::kUInt8, RedOp::kMin, 700001}};

// One all-reduce, checked against the reference; "" or the failure.
std::string AllReduceChecked(Communicator& comm, const Case& c, uint64_t seed, bool in_place, uint64_t* hash) {
  const size_t bytes = c.count * DataTypeSize(c.dtype);
  const std::string ctx = std::string(DataTypeName(c.dtype)) + " " + RedOpName(c.op) +
                          " count=" + std::to_string(c.count) + (in_place ? " in place: " : ": ");
  GuardedBuffer send(bytes), recv(bytes);
  FillInput(c.dtype, c.op, seed, comm.rank(), 0, c.count, send.data());
  void* dst = in_place ? send.data() : recv.data();
  Status st = comm.AllReduce(send.data(), dst, c.count, c.dtype, c.op);
  if (!st.ok()) return ctx + st.ToString();
  std::string err = VerifyReduction(dst, c.dtype, c.op, seed, comm.nranks(), 0, c.count);
  if (!err.empty()) return ctx + err;
  if (!send.GuardsIntact() || !recv.GuardsIntact()) return ctx + "wrote outside the buffers";
  *hash = HashBytes(dst, bytes, *hash);
  return "";
}

int ThreadsRank(Shared& sh, const std::vector<std::string>& servers, const JobId& job, int nranks, int rank,
                size_t chunk_bytes) {
  CommConfig cfg;
  cfg.chunk_bytes = chunk_bytes;
  cfg.window = 16;
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(servers, job, nranks, rank, cfg, &comm);
  if (!st.ok()) return sh.Fail(rank, "create: " + st.ToString());
  uint64_t h = 0;
  int k = 0;
  for (const Case& c : kCases) {
    const uint64_t seed = SeedFor(90, static_cast<uint64_t>(c.dtype), static_cast<uint64_t>(c.op), c.count);
    std::string err = AllReduceChecked(*comm, c, seed, (k++ % 2) == 1, &h);
    if (!err.empty()) return sh.Fail(rank, err);
  }
  sh->hash[rank][0] = h;
  return 0;
}

// `offload_share`: the server's --reduce-offload-share; `on_workers` gets how many chunks its
// reduction threads took (server 0).
// 16 KiB chunks by default: many chunks per server, deep windows, several reductions at a time.
uint64_t RunWithThreads(int reduce_threads, double offload_share = 0, uint64_t* on_workers = nullptr,
                        size_t chunk_bytes = 16384) {
  server::ServerOptions opts = TestServerOptions();
  opts.reduce_threads = reduce_threads;
  opts.reduce_offload_share = offload_share;
  ServerFarm farm;
  EXPECT_TRUE(farm.Bind(2, opts).ok());
  const auto servers = farm.addresses();
  const JobId job = JobId::Random();
  constexpr int kRanks = 4;
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) kids.Spawn([&, r] { return ThreadsRank(sh, servers, job, kRanks, r, chunk_bytes); });
  farm.Serve();
  ExpectChildrenOk(kids, sh);
  const std::string what = "allreduce with " + std::to_string(reduce_threads) + " reduction threads";
  ExpectSameHash(sh, 0, kRanks, 0, what.c_str());
  EXPECT_EQ(farm.server(0).stats().reduce_threads, static_cast<uint64_t>(reduce_threads));
  EXPECT_GT(farm.server(0).stats().chunks_reduced, chunk_bytes <= 16384 ? 100u : 5u);
  if (on_workers != nullptr) *on_workers = farm.server(0).stats().chunks_reduced_on_workers;
  EXPECT_EQ(farm.WaitIdle(), "");
  return sh->hash[0][0];
}

TEST(E2eReduceThreads, LoopOnlyAndFourWorkersGiveTheSameBits) {
  uint64_t loop_on_workers = 0;
  uint64_t workers_on_workers = 0;
  const uint64_t loop_only = RunWithThreads(0, 0, &loop_on_workers);
  const uint64_t workers = RunWithThreads(4, 0, &workers_on_workers);
  EXPECT_EQ(Hex(loop_only), Hex(workers)) << "results depend on the number of reduction threads";
  EXPECT_EQ(loop_on_workers, 0u);
  EXPECT_GT(workers_on_workers, 0u) << "with an offload share of 0 the workers take every multi-chunk reduction";
}

// With threads but a share no load reaches, every reduction of these 16 KiB chunks (64 KiB read
// over 4 ranks, under the 2 MiB that always goes to a worker) stays on the event loop, and the
// bits are those of the loop alone.
TEST(E2eReduceThreads, ReductionsBelowTheOffloadShareStayOnTheLoop) {
  uint64_t on_workers = 0;
  const uint64_t loop_only = RunWithThreads(0);
  const uint64_t kept = RunWithThreads(4, 1.0, &on_workers);
  EXPECT_EQ(Hex(loop_only), Hex(kept));
  EXPECT_EQ(on_workers, 0u);
}

// A reduction reading 2 MiB or more (4 ranks' 512 KiB chunks) would hold the loop too long: it goes
// to a worker however little the reductions needed lately.
TEST(E2eReduceThreads, LongReductionsGoToTheWorkersWhateverTheShare) {
  uint64_t on_workers = 0;
  const uint64_t loop_only = RunWithThreads(0, 0, nullptr, 512 * 1024);
  const uint64_t long_ones = RunWithThreads(4, 1.0, &on_workers, 512 * 1024);
  EXPECT_EQ(Hex(loop_only), Hex(long_ones));
  EXPECT_GT(on_workers, 0u);
}

}  // namespace
}  // namespace optcast::e2e
