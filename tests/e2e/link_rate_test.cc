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
int OneAllReduce(Shared& sh, const std::vector<std::string>& servers, const JobId& job, int rank, size_t count) {
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(servers, job, kRanks, rank, CommConfig{}, &comm);
  if (!st.ok()) return sh.Fail(rank, "create: " + st.ToString());
  const uint64_t seed = SeedFor(77, count);
  GuardedBuffer send(count * 4), recv(count * 4);
  FillInput(DataType::kFloat32, RedOp::kSum, seed, rank, 0, count, send.data());
  st = comm->AllReduce(send.data(), recv.data(), count, DataType::kFloat32, RedOp::kSum);
  if (!st.ok()) return sh.Fail(rank, "allreduce: " + st.ToString());
  std::string err = VerifyReduction(recv.data(), DataType::kFloat32, RedOp::kSum, seed, kRanks, 0, count);
  if (!err.empty()) return sh.Fail(rank, err);
  return 0;
}

// The chunks each server, all announcing `link_rate_bits`, reduced for one checked float32
// AllReduce of `count` elements over 4 ranks.
std::vector<uint64_t> ChunksPerServer(uint64_t link_rate_bits, size_t count) {
  server::ServerOptions opts = TestServerOptions();
  opts.link_rate_bits = link_rate_bits;
  ServerFarm farm;
  EXPECT_TRUE(farm.Bind(kServers, opts).ok());
  const auto servers = farm.addresses();
  const JobId job = JobId::Random();
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) kids.Spawn([&, r] { return OneAllReduce(sh, servers, job, r, count); });
  farm.Serve();
  ExpectChildrenOk(kids, sh);
  std::vector<uint64_t> chunks;
  for (int j = 0; j < kServers; ++j) chunks.push_back(farm.server(j).stats().chunks_reduced);
  EXPECT_EQ(farm.WaitIdle(), "");
  return chunks;
}

// How many servers took part in one 16 KiB AllReduce.
int ServersThatReduced(uint64_t link_rate_bits) {
  int used = 0;
  for (uint64_t c : ChunksPerServer(link_rate_bits, 4096)) used += c > 0 ? 1 : 0;
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

// 1 MiB over 4 servers: 256 KiB per server, in 32 KiB chunks (8) over tcp when the ports are
// fast or unknown, in one 256 KiB chunk over ofi (client/plan.h, kFabricChunks); at 100 Mbit/s a
// round of 4 ranks' chunks in 5 ms allows 16 KiB (16 chunks) on either; at 10 Mbit/s the 4 KiB
// floor (64).
TEST(E2eLinkRate, SlowerPortsCutShorterChunks) {
  const uint64_t unshrunk = OverFabric() ? 1 : 8;
  for (const auto& [bits, want] :
       {std::pair{uint64_t{0}, unshrunk}, std::pair{uint64_t{10'000'000'000}, unshrunk},
        std::pair{uint64_t{100'000'000}, uint64_t{16}}, std::pair{uint64_t{10'000'000}, uint64_t{64}}}) {
    const std::vector<uint64_t> chunks = ChunksPerServer(bits, 262144);
    for (int j = 0; j < kServers; ++j) EXPECT_EQ(chunks[j], want) << "server " << j << " at " << bits << " bit/s";
  }
}

}  // namespace
}  // namespace optcast::e2e
