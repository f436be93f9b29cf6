// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A server of an aggregation tree keeps per-job and per-chunk state for its members (its fan-in),
// not for every rank of the job: a leaf with one rank of a 100 000-rank job charges a collective
// and a slot for one member, and a flat server refuses such a job with the way out.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "harness.h"
#include "optcast/communicator.h"
#include "optcast/job_id.h"
#include "server/buffer_pool.h"
#include "server/job.h"
#include "server/tree_membership.h"
#include "tree_farm.h"

namespace optcast::tree {
namespace {

using std::chrono::milliseconds;

// The first error a rank sees: from joining, or from its first collective.
Status JoinAndAllReduce(const std::string& server, const JobId& job, int nranks, int rank,
                        std::unique_ptr<Communicator>* comm) {
  Status status = e2e::MakeComm({server}, job, nranks, rank, e2e::CommConfig{}, comm);
  if (!status.ok()) return status;
  std::vector<float> in(16, 1.0f), out(16);
  return (*comm)->AllReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
}

TEST(TreeFanIn, SeatsFollowTheJoinOrder) {
  server::TreeMembership m(1000);
  ASSERT_TRUE(m.Add(700, false).ok());
  ASSERT_TRUE(m.Add(3, true).ok());
  ASSERT_TRUE(m.Grow(3, 299, 0).ok());
  ASSERT_TRUE(m.Add(999, false).ok());
  EXPECT_EQ(m.seated(), (std::vector<uint32_t>{700, 3, 999}));
  EXPECT_EQ(m.seat(700), 0u);
  EXPECT_EQ(m.seat(3), 1u);
  EXPECT_EQ(m.seat(999), 2u);
  EXPECT_FALSE(m.Add(3, false).ok()) << "a member joins once";
  EXPECT_EQ(m.seated().size(), 3u);
}

TEST(TreeFanIn, LeafSlotStateFollowsItsMembersNotTheJobsRanks) {
  // More ranks than one server may combine (8192): a tree job is bounded by fan-in only.
  constexpr uint32_t kRanks = 100000;
  server::ServerOptions options = e2e::TestServerOptions();
  options.job_timeout = milliseconds(1500);
  TreeFarm farm;
  ASSERT_TRUE(farm.Start({-1, 0}, options).ok());
  server::Server& leaf = farm.server(1);
  ASSERT_EQ(leaf.stats().memory_used, 0u);

  // Rank 0 of a job whose other ranks never come: its chunk waits at the leaf until the job times out.
  Status status;
  std::thread rank([&] {
    std::unique_ptr<Communicator> comm;
    status = JoinAndAllReduce(farm.address(1), JobId::Random(), kRanks, 0, &comm);
  });
  const uint64_t chunk = server::BufferPool::CapacityFor(16 * sizeof(float));
  const uint64_t expected = chunk + server::CollStateBytes(1) + server::SlotStateBytes(1);
  EXPECT_TRUE(e2e::WaitFor([&] { return leaf.stats().memory_used >= expected; }, milliseconds(5000)))
      << "memory used at the leaf: " << leaf.stats().memory_used;
  const uint64_t used = leaf.stats().memory_used;
  rank.join();
  EXPECT_EQ(used, expected) << "the chunk buffer, a collective and a slot with one member";
  EXPECT_LT(used + 8 * (kRanks - 1), chunk + server::CollStateBytes(kRanks) + server::SlotStateBytes(kRanks));
  EXPECT_FALSE(status.ok()) << "the job cannot complete without its other ranks";
  EXPECT_TRUE(e2e::WaitFor([&] { return leaf.stats().memory_used == 0; })) << "the failed job's memory is freed";
}

TEST(TreeFanIn, ATreeRootTakesAWideJobsOwnRankBeforeAnyChildServerJoins) {
  constexpr uint32_t kRanks = 100000;
  server::ServerOptions options = e2e::TestServerOptions();
  options.job_timeout = milliseconds(1500);
  options.tree_root = true;  // as --topology sets it at a root with children
  TreeFarm farm;
  ASSERT_TRUE(farm.Start({-1}, options).ok());
  server::Server& root = farm.server(0);
  Status status;
  std::thread rank([&] {
    std::unique_ptr<Communicator> comm;
    status = JoinAndAllReduce(farm.address(0), JobId::Random(), kRanks, 0, &comm);
  });
  const uint64_t expected =
      server::BufferPool::CapacityFor(16 * sizeof(float)) + server::CollStateBytes(1) + server::SlotStateBytes(1);
  EXPECT_TRUE(e2e::WaitFor([&] { return root.stats().memory_used >= expected; }, milliseconds(5000)))
      << "memory used at the root: " << root.stats().memory_used;
  EXPECT_EQ(root.stats().memory_used, expected) << "state for the one member, not for the job's ranks";
  rank.join();
  ASSERT_FALSE(status.ok()) << "the job cannot complete without its other ranks";
  EXPECT_NE(status.message().find("of the job's 100000 ranks have joined the tree"), std::string::npos)
      << status.message();
}

TEST(TreeFanIn, AFlatServerRefusesAJobWiderThanItsFanInAndNamesTheTree) {
  TreeFarm farm;
  ASSERT_TRUE(farm.Start({-1}, e2e::TestServerOptions()).ok());
  std::unique_ptr<Communicator> comm;
  const Status status = JoinAndAllReduce(farm.address(0), JobId::Random(), 100000, 0, &comm);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("nranks=100000"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("aggregation tree"), std::string::npos) << status.message();
  EXPECT_EQ(farm.server(0).stats().jobs_active, 0u);
}

TEST(TreeFanIn, AFlatJobWiderThanMaxFanInIsRefusedNamingTheFlag) {
  server::ServerOptions options = e2e::TestServerOptions();
  options.max_fan_in = 2;
  TreeFarm farm;
  ASSERT_TRUE(farm.Start({-1}, options).ok());
  std::unique_ptr<Communicator> comm;
  const Status status = JoinAndAllReduce(farm.address(0), JobId::Random(), 3, 0, &comm);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("nranks=3"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("--max-fan-in"), std::string::npos) << status.message();
}

TEST(TreeFanIn, ALeafRefusesTheMemberBeyondMaxFanInNamingTheLimit) {
  server::ServerOptions options = e2e::TestServerOptions();
  options.max_fan_in = 2;
  options.job_timeout = milliseconds(1500);
  TreeFarm farm;
  ASSERT_TRUE(farm.Start({-1, 0}, options).ok());
  const JobId job = JobId::Random();
  // Two ranks of a three-rank tree job fill the leaf; they wait for the third.
  std::unique_ptr<Communicator> comms[3];
  Status waiting[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(e2e::MakeComm({farm.address(1)}, job, 3, r, e2e::CommConfig{}, &comms[r]).ok());
  }
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      std::vector<float> in(16, 1.0f), out(16);
      waiting[r] = comms[r]->AllReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
    });
  }
  const Status third = JoinAndAllReduce(farm.address(1), job, 3, 2, &comms[2]);
  for (auto& t : ranks) t.join();
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.message().find("--max-fan-in=2"), std::string::npos) << third.message();
  EXPECT_NE(third.message().find("rank 2"), std::string::npos) << third.message();
  for (const Status& st : waiting) EXPECT_FALSE(st.ok()) << "the job cannot complete without its third rank";
  EXPECT_TRUE(e2e::WaitFor([&] { return farm.server(1).stats().memory_used == 0; }));
}

}  // namespace
}  // namespace optcast::tree
