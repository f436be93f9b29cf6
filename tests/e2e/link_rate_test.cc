// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Servers announce their port rate in the welcome, and ranks stripe small collectives by the
// slowest: on slow ports over more servers (client/plan.h). Counted on the servers themselves.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checks.h"
#include "harness.h"

namespace optcast::e2e {
namespace {

constexpr int kRanks = 4;
constexpr int kServers = 4;
constexpr size_t kCount = 4096;  // 16 KiB of float32

int OneAllReduce(Shared& sh, const std::vector<std::string>& servers, const JobId& job, int rank) {
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(servers, job, kRanks, rank, CommConfig{}, &comm);
  if (!st.ok()) return sh.Fail(rank, "create: " + st.ToString());
  const uint64_t seed = SeedFor(77, kCount);
  GuardedBuffer send(kCount * 4), recv(kCount * 4);
  FillInput(DataType::kFloat32, RedOp::kSum, seed, rank, 0, kCount, send.data());
  st = comm->AllReduce(send.data(), recv.data(), kCount, DataType::kFloat32, RedOp::kSum);
  if (!st.ok()) return sh.Fail(rank, "allreduce: " + st.ToString());
  std::string err = VerifyReduction(recv.data(), DataType::kFloat32, RedOp::kSum, seed, kRanks, 0, kCount);
  if (!err.empty()) return sh.Fail(rank, err);
  return 0;
}

// How many of the servers, all announcing `link_rate_bits`, took part in one checked 16 KiB
// AllReduce of 4 ranks.
int ServersThatReduced(uint64_t link_rate_bits) {
  server::ServerOptions opts = TestServerOptions();
  opts.link_rate_bits = link_rate_bits;
  ServerFarm farm;
  EXPECT_TRUE(farm.Bind(kServers, opts).ok());
  const auto servers = farm.addresses();
  const JobId job = JobId::Random();
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) kids.Spawn([&, r] { return OneAllReduce(sh, servers, job, r); });
  farm.Serve();
  ExpectChildrenOk(kids, sh);
  int used = 0;
  for (int j = 0; j < kServers; ++j) used += farm.server(j).stats().chunks_reduced > 0 ? 1 : 0;
  EXPECT_EQ(farm.WaitIdle(), "");
  return used;
}

// Unknown or fast ports: 8 KiB per server at least, so 2 servers. 160 Mbit/s: 4 ranks' shards
// through a port in 1 ms allow 5000 B each, so 3. 10 Mbit/s: the 1 KiB floor, so all 4.
TEST(E2eLinkRate, SlowerPortsSpreadASmallCollectiveOverMoreServers) {
  EXPECT_EQ(ServersThatReduced(0), 2);
  EXPECT_EQ(ServersThatReduced(100'000'000'000ull), 2);
  EXPECT_EQ(ServersThatReduced(160'000'000ull), 3);
  EXPECT_EQ(ServersThatReduced(10'000'000ull), 4);
}

}  // namespace
}  // namespace optcast::e2e
