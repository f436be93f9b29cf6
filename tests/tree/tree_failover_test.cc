// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Failover over aggregation trees (docs/tree.md, "Failure"): two trees of real `optcast server`
// processes over two racks, as `optcast topology --leaves-per-rack 2` lays them out, and a server
// of one tree SIGKILLed under a running job. The job drops that tree and goes on over the other,
// every result checked against the tree reference and equal on every rank; once no tree is left,
// every rank fails with a clear error.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <regex>
#include <thread>

#include "harness.h"
#include "observe/metrics.h"
#include "optcast/communicator.h"
#include "optcast/job_id.h"
#include "server_process.h"
#include "tree_farm.h"
#include "tree_reference.h"

namespace optcast::tree {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// root0 <- {a0, b0} is tree 0, root1 <- {a1, b1} tree 1; ranks 0, 1 are in rack a, 2, 3 in rack
// b, each listing its rack's leaves in tree order. Both trees have the shape `kShape`.
const TreeShape kShape{{-1, 0, 0}, {1, 1, 2, 2}};
constexpr int kRanks = 4;

struct TwoTrees {
  daemon::ServerProcess root0, root1, a0, a1, b0, b1;

  Status Start() {
    const std::vector<std::string> common{"--timeout-ms", "8000", "--metrics-listen", "127.0.0.1:0"};
    for (daemon::ServerProcess* root : {&root0, &root1}) {
      std::vector<std::string> args{"--listen", "127.0.0.1:0"};
      args.insert(args.end(), common.begin(), common.end());
      OPTCAST_RETURN_IF_ERROR(root->Start(args));
    }
    for (auto [leaf, root] : {std::pair{&a0, &root0}, {&b0, &root0}, {&a1, &root1}, {&b1, &root1}}) {
      std::vector<std::string> args{"--listen", "127.0.0.1:0", "--upstream", root->address()};
      args.insert(args.end(), common.begin(), common.end());
      OPTCAST_RETURN_IF_ERROR(leaf->Start(args));
    }
    return Status::Ok();
  }

  std::vector<std::string> RankServers(int rank) const {
    if (rank < 2) return {a0.address(), a1.address()};
    return {b0.address(), b1.address()};
  }
};

// The value of a metric line `name value` on a server's /metrics page, or -1.
double Metric(daemon::ServerProcess& server, const std::string& name) {
  std::smatch m;
  const std::string out = server.Output();
  if (!std::regex_search(out, m, std::regex("metrics on http://[^:]+:(\\d+)/metrics"))) return -1;
  httplib::Client cli("127.0.0.1", std::stoi(m[1]));
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(5, 0);
  auto res = cli.Get("/metrics");
  if (!res || res->status != 200) return -1;
  if (!std::regex_search(res->body, m, std::regex("\n" + name + " ([0-9.e+]+)"))) return -1;
  return std::stod(m[1]);
}

uint64_t Fnv(const std::vector<uint8_t>& b) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t x : b) h = (h ^ x) * 1099511628211ull;
  return h;
}

// Every rank runs `rounds` allreduces of one job (float32 and int32 sums, bfloat16 averages, odd
// sizes, every fourth in place), each checked against the tree reference; each kill runs once rank 0 completed its
// number of them. hashes[r][i]: the bits rank r got in round i.
struct Kill {
  int after = 0;
  std::function<void()> run;
};

struct JobRun {
  std::vector<Status> st = std::vector<Status>(kRanks);
  std::vector<Clock::time_point> ended = std::vector<Clock::time_point>(kRanks);
  std::vector<std::vector<uint64_t>> hashes = std::vector<std::vector<uint64_t>>(kRanks);
  std::vector<FailoverStats> stats = std::vector<FailoverStats>(kRanks);
  Clock::time_point killed_at;  // the last kill
  bool killed = false;          // every kill ran

  void Run(const TwoTrees& trees, int rounds, const std::vector<Kill>& kills) {
    Run([&](int r) { return trees.RankServers(r); }, kShape, rounds, kills);
  }

  void Run(const std::function<std::vector<std::string>(int)>& servers_of, const TreeShape& shape, int rounds,
           const std::vector<Kill>& kills) {
    const JobId job = JobId::Random();
    std::atomic<int> done{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        e2e::CommConfig c;
        c.chunk_bytes = 8192;
        c.timeout = milliseconds(30000);
        c.failover = true;
        std::unique_ptr<Communicator> comm;
        st[r] = e2e::MakeComm(servers_of(r), job, kRanks, r, c, &comm);
        for (int i = 0; st[r].ok() && i < rounds; ++i) {
          // float32 and int32 sums, and a bfloat16 average, which travels up as a float32 partial.
          const DataType dt = i % 3 == 0 ? DataType::kFloat32 : i % 3 == 1 ? DataType::kInt32 : DataType::kBFloat16;
          const RedOp op = dt == DataType::kBFloat16 ? RedOp::kAvg : RedOp::kSum;
          const size_t count = (size_t{1} << 16) + 7 * static_cast<size_t>(i);
          const uint64_t seed = 1000 + static_cast<uint64_t>(i);
          std::vector<uint8_t> in(count * DataTypeSize(dt)), out(in.size());
          e2e::FillInput(dt, op, seed, r, 0, count, in.data());
          const bool in_place = i % 4 == 3;
          std::vector<uint8_t>& got = in_place ? in : out;
          st[r] = comm->AllReduce(in.data(), got.data(), count, dt, op);
          if (st[r].ok()) {
            const std::string err = VerifyTree(shape, got.data(), dt, op, seed, count);
            if (!err.empty()) st[r] = InternalError(fmt::format("round {}: {}", i, err));
            hashes[r].push_back(Fnv(got));
          }
          if (r == 0) done.store(i + 1);
        }
        stats[r] = comm ? comm->failover_stats() : FailoverStats{};
        ended[r] = Clock::now();
      });
    }
    killed = true;
    for (const Kill& k : kills) {
      killed = killed && e2e::WaitFor([&] { return done.load() >= k.after; }, milliseconds(60000));
      if (!killed) break;
      killed_at = Clock::now();
      k.run();
    }
    for (auto& t : threads) t.join();
  }

  // Every rank completed every round after exactly one failover, with the same bits as rank 0.
  void ExpectEveryRankCompletedAfterOneFailover(int rounds) const {
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
      ASSERT_EQ(hashes[r].size(), static_cast<size_t>(rounds)) << "rank " << r;
      EXPECT_EQ(hashes[r], hashes[0]) << "rank " << r << " got other bits than rank 0";
      EXPECT_EQ(stats[r].failovers, 1u) << "rank " << r;
    }
  }
};

// Leaf 1 of rack a dies mid-allreduce: ranks 0 and 1 lose it, ranks 2 and 3 learn of it from
// tree 1 (their leaf 1 loses its root's job) or from tree 0's notice, every rank reports to its
// leaf 0, root 0 announces the failover, and the job goes on over tree 0 alone: the collectives
// in flight are re-run there, every one is right and bitwise the same on every rank. The rest of
// tree 1 gives the job up (no job left there), and tree 0's servers count the failover.
TEST(TreeFailover, ALeafSigkilledMidAllreduceMovesTheJobToTheOtherTree) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  TwoTrees trees;
  ASSERT_TRUE(trees.Start().ok());
  JobRun run;
  const int rounds = 24;
  run.Run(trees, rounds, {{3, [&] { trees.a1.Signal(SIGKILL); }}});
  ASSERT_TRUE(run.killed) << "the trees never completed 3 collectives: " << run.st[0].ToString();
  ASSERT_NO_FATAL_FAILURE(run.ExpectEveryRankCompletedAfterOneFailover(rounds));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(run.stats[r].servers_left, 1u) << "rank " << r;
  // Tree 0's servers applied the failover; tree 1's gave the job up and hold nothing of it.
  for (daemon::ServerProcess* s : {&trees.root0, &trees.a0, &trees.b0}) {
    EXPECT_EQ(Metric(*s, "optcast_failovers_total"), 1) << s->Output();
  }
  for (daemon::ServerProcess* s : {&trees.root1, &trees.b1}) {
    EXPECT_TRUE(e2e::WaitFor([&] { return Metric(*s, "optcast_server_jobs_active") == 0; }, milliseconds(10000)))
        << s->Output();
    EXPECT_EQ(Metric(*s, "optcast_failovers_total"), 0) << s->Output();
  }
}

// The root of tree 1 dies: both its leaves lose their upstream server, which fails the job there
// as "unavailable", so every rank drops tree 1 and the job goes on over tree 0.
TEST(TreeFailover, ARootSigkilledMidAllreduceMovesTheJobToTheOtherTree) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  TwoTrees trees;
  ASSERT_TRUE(trees.Start().ok());
  JobRun run;
  const int rounds = 12;
  run.Run(trees, rounds, {{3, [&] { trees.root1.Signal(SIGKILL); }}});
  ASSERT_TRUE(run.killed) << "the trees never completed 3 collectives: " << run.st[0].ToString();
  ASSERT_NO_FATAL_FAILURE(run.ExpectEveryRankCompletedAfterOneFailover(rounds));
}

// Two trees of depth 3 (root, inner server, a leaf per rack), servers on threads of this process:
// the inner server of tree 1 stops mid-allreduce. Its leaves lose their parent and its root its
// child, the ranks drop tree 1, and the failover goes through tree 0's inner server both ways
// (reports and Epochs up, the Notice and the announcement down).
TEST(TreeFailover, AnInnerServerOfOneOfTwoDepth3TreesStoppedMovesTheJobToTheOtherTree) {
  // Nodes 0-3: tree 0 (root, inner, leaf of rack a, leaf of rack b); 4-7: tree 1, the same.
  const std::vector<int> parent{-1, 0, 1, 1, -1, 4, 5, 5};
  server::ServerOptions o = e2e::TestServerOptions();
  o.job_timeout = milliseconds(8000);
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(parent, o).ok());
  const TreeShape shape{{-1, 0, 1, 1}, {2, 2, 3, 3}};
  JobRun run;
  const int rounds = 12;
  run.Run(
      [&](int r) {
        return r < 2 ? std::vector{farm.address(2), farm.address(6)} : std::vector{farm.address(3), farm.address(7)};
      },
      shape, rounds, {{3, [&] { farm.Kill(5); }}});
  ASSERT_TRUE(run.killed) << "the trees never completed 3 collectives: " << run.st[0].ToString();
  ASSERT_NO_FATAL_FAILURE(run.ExpectEveryRankCompletedAfterOneFailover(rounds));
  // Tree 0's inner server applied the failover too, and the rest of tree 1 holds nothing of the job.
  for (int node : {0, 1, 2, 3}) {
    EXPECT_NE(farm.server(node).metrics().Render().find("\noptcast_failovers_total 1"), std::string::npos)
        << "node " << node;
  }
  for (int node : {4, 6, 7}) {
    EXPECT_TRUE(e2e::WaitFor([&] { return farm.server(node).stats().jobs_active == 0; }, milliseconds(10000)))
        << "node " << node;
  }
}

// What a tree job does not survive: its last tree. Leaf 1 of rack a dies, the job goes on over
// tree 0; then leaf 0 of rack b dies too: every rank, in both racks, fails within the bound with
// an error that says no server is left, and none gets a wrong result.
TEST(TreeFailover, WhenTheLastTreeLosesALeafEveryRankFailsClearly) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  TwoTrees trees;
  ASSERT_TRUE(trees.Start().ok());
  JobRun run;
  // Rank 0 stops at round 100000 at the latest; the second kill ends the job long before.
  run.Run(trees, 100000, {{3, [&] { trees.a1.Signal(SIGKILL); }}, {9, [&] { trees.b0.Signal(SIGKILL); }}});
  ASSERT_TRUE(run.killed) << "the job did not go on after the first leaf died: " << run.st[0].ToString();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_FALSE(run.st[r].ok()) << "rank " << r;
    EXPECT_EQ(run.st[r].message().find("element"), std::string::npos) << "rank " << r << ": " << run.st[r].ToString();
    EXPECT_NE(run.st[r].message().find("no server of the job is left"), std::string::npos)
        << "rank " << r << ": " << run.st[r].ToString();
    EXPECT_EQ(run.stats[r].failovers, 1u) << "rank " << r;
    const auto waited = std::chrono::duration_cast<milliseconds>(run.ended[r] - run.killed_at).count();
    EXPECT_LT(waited, 8000) << "rank " << r << " learned of the failure after " << waited
                            << " ms: " << run.st[r].ToString();
  }
}

}  // namespace
}  // namespace optcast::tree
