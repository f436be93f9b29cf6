// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Aggregation trees of depth 2 and 3 on loopback: every dtype and op against the tree reference,
// bitwise-equal results across runs, authentication between servers, a clear error for
// collectives a tree does not carry, and an inner server dying mid-collective.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "harness.h"
#include "optcast/communicator.h"
#include "optcast/job_id.h"
#include "tree_farm.h"
#include "tree_reference.h"

namespace optcast::tree {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Depth 2: a root (0) and three leaves; ranks interleave over the leaves, and rank 6 talks to the
// root itself, so the root mixes its own rank with partials.
TreeShape Depth2() { return TreeShape{{-1, 0, 0, 0}, {1, 2, 3, 1, 2, 1, 0}}; }

// Depth 3: root 0, inner servers 1 and 2, leaves 3 and 4 under 1, leaf 5 under 2; rank 6 talks to
// inner server 2 and rank 7 to the root.
TreeShape Depth3() { return TreeShape{{-1, 0, 0, 1, 1, 2}, {3, 4, 5, 3, 4, 5, 2, 0}}; }

server::ServerOptions TreeServerOptions() {
  server::ServerOptions o = e2e::TestServerOptions();
  o.reduce_threads = 0;
  return o;
}

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
                                  DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,    DataType::kUInt32,
                                  DataType::kInt64,   DataType::kUInt64};
constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg};

struct RankRun {
  Status status;
  std::vector<uint64_t> hashes;  // one per collective
};

// Each rank runs every (dtype, op) allreduce of `count` elements through its server and checks it.
std::vector<RankRun> RunAllTypes(TreeFarm& farm, const TreeShape& shape, size_t count, const e2e::CommConfig& config,
                                 uint64_t seed, const std::vector<DataType>& types, const std::vector<RedOp>& ops,
                                 milliseconds stagger = milliseconds(0)) {
  const JobId job = JobId::Random();
  std::vector<RankRun> out(shape.nranks());
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.nranks(); ++r) {
    threads.emplace_back([&, r] {
      // Ranks join in a different order on each run when staggered (highest rank first).
      std::this_thread::sleep_for(stagger * (shape.nranks() - r));
      std::unique_ptr<Communicator> comm;
      Status st = e2e::MakeComm({farm.address(shape.rank_node[r])}, job, shape.nranks(), r, config, &comm);
      int k = 0;
      for (DataType dt : types) {
        for (RedOp op : ops) {
          if (!st.ok()) break;
          const uint64_t s = seed + static_cast<uint64_t>(k++);
          const size_t es = DataTypeSize(dt);
          std::vector<uint8_t> in(count * es), got(count * es);
          e2e::FillInput(dt, op, s, r, 0, count, in.data());
          st = comm->AllReduce(in.data(), got.data(), count, dt, op);
          if (st.ok()) {
            const std::string err = VerifyTree(shape, got.data(), dt, op, s, count);
            if (!err.empty()) st = InternalError("wrong result: " + err);
          }
          out[r].hashes.push_back(e2e::HashBytes(got.data(), got.size()));
        }
      }
      out[r].status = st;
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void ExpectAllOk(const std::vector<RankRun>& runs) {
  for (size_t r = 0; r < runs.size(); ++r)
    EXPECT_TRUE(runs[r].status.ok()) << "rank " << r << ": " << runs[r].status.ToString();
}

std::vector<DataType> AllTypes() { return {std::begin(kAllTypes), std::end(kAllTypes)}; }
std::vector<RedOp> AllOps() { return {std::begin(kAllOps), std::end(kAllOps)}; }

e2e::CommConfig SmallChunks() {
  e2e::CommConfig c;
  c.chunk_bytes = 4096;  // several chunks per collective, so chunks pipeline through the tree
  return c;
}

TEST(Tree, Depth2EveryTypeAndOp) {
  const TreeShape shape = Depth2();
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, TreeServerOptions()).ok());
  ExpectAllOk(RunAllTypes(farm, shape, 3001, SmallChunks(), 100, AllTypes(), AllOps()));
}

// Lanes asked of every server (--io-threads 3): a server in a tree runs one lane, the rule that
// keeps a tree job combined in one place, and its link to the parent joins the parent's lane 0.
TEST(Tree, Depth3WithLanesAskedRunsOneLanePerServer) {
  const TreeShape shape = Depth3();
  TreeFarm farm;
  server::ServerOptions o = TreeServerOptions();
  o.io_threads = 3;
  ASSERT_TRUE(farm.Start(shape.parent, o).ok());
  ExpectAllOk(RunAllTypes(farm, shape, 3001, SmallChunks(), 200, AllTypes(), {RedOp::kSum, RedOp::kMax}));
  for (size_t i = 0; i < shape.parent.size(); ++i) {
    EXPECT_EQ(farm.server(static_cast<int>(i)).stats().lanes, 1u) << "server " << i;
  }
}

// A root started as a plain server of 2 lanes, its children naming it with --upstream and every
// rank at a leaf: it keeps its lanes, and the children's job is combined on its lane 0.
TEST(Tree, ARootOfTwoLanesWithoutTopologyCombinesItsChildrenOnLaneZero) {
  const TreeShape shape{{-1, 0, 0}, {1, 2, 1, 2}};
  TreeFarm farm;
  farm.mark_roots = false;
  server::ServerOptions o = TreeServerOptions();
  o.io_threads = 2;
  ASSERT_TRUE(farm.Start(shape.parent, o).ok());
  ExpectAllOk(RunAllTypes(farm, shape, 3001, SmallChunks(), 100, AllTypes(), {RedOp::kSum, RedOp::kMax}));
  // Over ofi a server runs one lane (docs/transports.md): the tree works the same.
  EXPECT_EQ(farm.server(0).stats().lanes, e2e::OverFabric() ? 1u : 2u) << "the root";
  EXPECT_EQ(farm.server(1).stats().lanes, 1u) << "a leaf";
}

TEST(Tree, Depth3EveryTypeAndOp) {
  const TreeShape shape = Depth3();
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, TreeServerOptions()).ok());
  ExpectAllOk(RunAllTypes(farm, shape, 3001, SmallChunks(), 200, AllTypes(), AllOps()));
}

// Bitwise ops of every integer type pass through the tree as they are, bit for bit.
TEST(Tree, Depth3BitwiseOps) {
  const TreeShape shape = Depth3();
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, TreeServerOptions()).ok());
  const std::vector<DataType> ints = {DataType::kInt8,   DataType::kUInt8, DataType::kInt32,
                                      DataType::kUInt32, DataType::kInt64, DataType::kUInt64};
  ExpectAllOk(RunAllTypes(farm, shape, 3001, SmallChunks(), 250, ints, {RedOp::kBand, RedOp::kBor, RedOp::kBxor}));
}

// With reduction threads, chunks large enough to be worth the hand-off combine off the event loop.
TEST(Tree, Depth3EveryTypeAndOpOnReductionThreads) {
  const TreeShape shape = Depth3();
  server::ServerOptions options = TreeServerOptions();
  options.reduce_threads = 2;
  options.reduce_offload_share = 0;  // however cheap the reductions, the threads take them
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, options).ok());
  e2e::CommConfig config;
  config.chunk_bytes = 64 * 1024;  // a partial of 2+ members is >= 64 KiB: the reduction threads take it
  ExpectAllOk(RunAllTypes(farm, shape, 70001, config, 400, AllTypes(), AllOps()));
}

TEST(Tree, SingleChunkAndSingleElement) {
  const TreeShape shape = Depth3();
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, TreeServerOptions()).ok());
  ExpectAllOk(RunAllTypes(farm, shape, 1, e2e::CommConfig{}, 300, AllTypes(), {RedOp::kSum, RedOp::kAvg}));
  ExpectAllOk(RunAllTypes(farm, shape, 777, e2e::CommConfig{}, 310, AllTypes(), {RedOp::kSum}));
}

// The servers prove the deployment secret to their parents the way workers prove it to them.
TEST(Tree, AuthenticatedDepth3) {
  const TreeShape shape = Depth3();
  server::ServerOptions o = TreeServerOptions();
  o.secret = "tree-test-secret-0123456789abcdef";
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, o).ok());
  e2e::CommConfig c = SmallChunks();
  c.secret = o.secret;
  ExpectAllOk(RunAllTypes(farm, shape, 2000, c, 400, {DataType::kFloat32, DataType::kBFloat16}, {RedOp::kSum}));
}

// A server whose secret differs from its parent's cannot join the parent's job: every rank below
// it gets an error.
TEST(Tree, WrongSecretBetweenServersFailsTheJob) {
  server::ServerOptions o = TreeServerOptions();
  o.secret = "parent-secret-0123456789abcdef";
  TreeFarm farm;
  // Build by hand: the root with one secret, the leaves with another.
  ASSERT_TRUE(farm.Start({-1}, o).ok());
  server::ServerOptions leaf = o;
  leaf.secret = "leaf-secret-0123456789abcdef00";
  leaf.upstream = transport::Endpoint{"127.0.0.1", farm.server(0).port()};
  server::Server s(leaf);
  ASSERT_TRUE(s.Start().ok());
  std::thread t([&] { (void)s.Run(); });
  e2e::CommConfig c;
  c.secret = leaf.secret;
  c.timeout = milliseconds(15000);
  const JobId job = JobId::Random();
  std::unique_ptr<Communicator> comm;
  Status st = e2e::MakeComm({"127.0.0.1:" + std::to_string(s.port())}, job, 2, 0, c, &comm);
  if (st.ok()) {
    std::vector<float> in(16, 1.0f), got(16);
    st = comm->AllReduce(in.data(), got.data(), 16, DataType::kFloat32, RedOp::kSum);
  }
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("authentication"), std::string::npos) << st.ToString();
  s.Stop();
  t.join();
}

// Two jobs at once on the same servers, placed differently, each get their own tree's result.
TEST(Tree, TwoJobsAtOnce) {
  const TreeShape a = Depth3();
  TreeShape b = Depth3();
  b.rank_node = {5, 5, 3, 4, 0, 2};  // 6 ranks, another placement
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(a.parent, TreeServerOptions()).ok());
  std::vector<RankRun> ra, rb;
  std::thread ta([&] { ra = RunAllTypes(farm, a, 2500, SmallChunks(), 600, AllTypes(), {RedOp::kSum, RedOp::kMax}); });
  std::thread tb([&] { rb = RunAllTypes(farm, b, 1700, SmallChunks(), 700, AllTypes(), {RedOp::kAvg, RedOp::kProd}); });
  ta.join();
  tb.join();
  ExpectAllOk(ra);
  ExpectAllOk(rb);
}

// Each server holds connections for its fan-in only: its own ranks, its child servers, and one
// to its parent per job, however many ranks the job has.
TEST(Tree, ConnectionsFollowTheFanIn) {
  const TreeShape shape = Depth3();  // 8 ranks
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, TreeServerOptions()).ok());
  const JobId job = JobId::Random();
  std::atomic<int> ready{0};
  std::atomic<bool> release{false};
  std::vector<Status> st(shape.nranks());
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.nranks(); ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm;
      st[r] = e2e::MakeComm({farm.address(shape.rank_node[r])}, job, shape.nranks(), r, e2e::CommConfig{}, &comm);
      std::vector<float> in(100, 1.0f), got(100);
      if (st[r].ok()) st[r] = comm->AllReduce(in.data(), got.data(), 100, DataType::kFloat32, RedOp::kSum);
      ++ready;
      e2e::WaitFor([&] { return release.load(); }, milliseconds(20000));
    });
  }
  if (!e2e::WaitFor([&] { return ready.load() == shape.nranks(); }, milliseconds(20000))) {
    release = true;
    for (auto& t : threads) t.join();
    FAIL() << "the ranks did not finish their allreduce";
  }
  for (size_t node = 0; node < shape.parent.size(); ++node) {
    uint64_t fan_in = shape.parent[node] >= 0 ? 1 : 0;  // the link to the parent
    for (int r = 0; r < shape.nranks(); ++r) fan_in += shape.rank_node[r] == static_cast<int>(node) ? 1 : 0;
    for (size_t c = 0; c < shape.parent.size(); ++c) fan_in += shape.parent[c] == static_cast<int>(node) ? 1 : 0;
    EXPECT_EQ(farm.server(static_cast<int>(node)).stats().connections, fan_in) << "server " << node;
    EXPECT_EQ(farm.server(static_cast<int>(node)).stats().jobs_active, 1u) << "server " << node;
  }
  release = true;
  for (auto& t : threads) t.join();
  for (int r = 0; r < shape.nranks(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
  // Once the ranks leave, every server of the tree forgets the job.
  for (size_t node = 0; node < shape.parent.size(); ++node) {
    EXPECT_TRUE(e2e::WaitFor([&] { return farm.server(static_cast<int>(node)).stats().jobs_active == 0; }))
        << "server " << node << " still holds the job";
  }
}

// A rank that never joins: its leaf's ranks and every other rank time out, with an error saying
// what the tree waited for.
TEST(Tree, AMissingRankTimesOutEverywhere) {
  const TreeShape shape = Depth2();  // 7 ranks; rank 2 (leaf 3's only rank) never comes
  server::ServerOptions o = TreeServerOptions();
  o.job_timeout = milliseconds(1500);
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, o).ok());
  const JobId job = JobId::Random();
  std::vector<Status> st(shape.nranks());
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.nranks(); ++r) {
    if (r == 2) continue;
    threads.emplace_back([&, r] {
      e2e::CommConfig c;
      c.timeout = milliseconds(10000);
      std::unique_ptr<Communicator> comm;
      st[r] = e2e::MakeComm({farm.address(shape.rank_node[r])}, job, shape.nranks(), r, c, &comm);
      std::vector<float> in(100, 1.0f), got(100);
      if (st[r].ok()) st[r] = comm->AllReduce(in.data(), got.data(), 100, DataType::kFloat32, RedOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < shape.nranks(); ++r) {
    if (r == 2) continue;
    EXPECT_EQ(st[r].code(), Code::kTimeout) << "rank " << r << ": " << st[r].ToString();
    // The root counts 6 of 7 ranks; the leaves wait for it to report that every rank has joined.
    EXPECT_NE(st[r].message().find("joined the tree"), std::string::npos) << "rank " << r << ": " << st[r].ToString();
  }
}

// A leaf whose parent is not there refuses the job's ranks with the reason.
TEST(Tree, UnreachableParentIsNamed) {
  server::ServerOptions o = TreeServerOptions();
  o.upstream = transport::Endpoint{"127.0.0.1", 1};  // nothing listens on port 1
  server::Server leaf(o);
  ASSERT_TRUE(leaf.Start().ok());
  std::thread t([&] { (void)leaf.Run(); });
  std::unique_ptr<Communicator> comm;
  e2e::CommConfig c;
  c.timeout = milliseconds(10000);
  Status st = e2e::MakeComm({"127.0.0.1:" + std::to_string(leaf.port())}, JobId::Random(), 2, 0, c, &comm);
  if (st.ok()) {
    std::vector<float> in(8, 1.0f), got(8);
    st = comm->AllReduce(in.data(), got.data(), 8, DataType::kFloat32, RedOp::kSum);
  }
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot reach its upstream server 127.0.0.1:1"), std::string::npos) << st.ToString();
  leaf.Stop();
  t.join();
}

// The same job, run twice with the ranks joining in different orders, gives bitwise-equal floats.
TEST(Tree, DeterministicAcrossRuns) {
  const TreeShape shape = Depth3();
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, TreeServerOptions()).ok());
  const std::vector<DataType> types = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64};
  const auto a = RunAllTypes(farm, shape, 4099, SmallChunks(), 500, types, {RedOp::kSum, RedOp::kAvg});
  const auto b =
      RunAllTypes(farm, shape, 4099, SmallChunks(), 500, types, {RedOp::kSum, RedOp::kAvg}, milliseconds(20));
  ExpectAllOk(a);
  ExpectAllOk(b);
  for (int r = 0; r < shape.nranks(); ++r) {
    EXPECT_EQ(a[r].hashes, b[r].hashes) << "rank " << r << " got different bits on the second run";
    EXPECT_EQ(a[r].hashes, a[0].hashes) << "rank " << r << " and rank 0 disagree";
  }
}

// The servers of a tree say so in their welcome, and every rank, the root's own included, cuts a
// tree's stripes finer than flat servers would (client/plan.h): a 1 MiB stripe in 64 chunks of
// 16 KiB, not 32 of 32 KiB. The root, which mixes its own rank with the leaves' partials, only
// completes if every rank cut alike; its own rank (6) joins first, before any leaf, so the root
// says it is a tree because it was started as one (as --topology starts it).
TEST(Tree, RanksCutATreesStripesFinerWithTheClientsDefaults) {
  const TreeShape shape = Depth2();
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, TreeServerOptions()).ok());
  constexpr size_t kCount = 1 << 18;  // 1 MiB of float32: one stripe per rank
  ExpectAllOk(RunAllTypes(farm, shape, kCount, e2e::CommConfig{}, 800, {DataType::kFloat32}, {RedOp::kSum},
                          /*stagger=*/milliseconds(30)));
  // Over ofi every stripe is cut in the fabric's chunks, a quarter of it and at least 256 KiB,
  // tree or not: 4.
  const uint64_t chunks = e2e::OverFabric() ? 4u : 64u;
  for (int node = 0; node < static_cast<int>(shape.parent.size()); ++node) {
    EXPECT_EQ(farm.server(node).stats().chunks_reduced, chunks) << "server " << node;
  }
}

// A tree carries allreduce only; other collectives fail with an error that says so.
TEST(Tree, ReduceScatterFailsWithAClearError) {
  const TreeShape shape = Depth2();
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, TreeServerOptions()).ok());
  const JobId job = JobId::Random();
  std::vector<Status> st(shape.nranks());
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.nranks(); ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm;
      e2e::CommConfig c;
      c.timeout = milliseconds(15000);
      st[r] = e2e::MakeComm({farm.address(shape.rank_node[r])}, job, shape.nranks(), r, c, &comm);
      if (!st[r].ok()) return;
      std::vector<float> in(64 * shape.nranks(), 1.0f), got(64);
      st[r] = comm->ReduceScatter(in.data(), got.data(), 64, DataType::kFloat32, RedOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < shape.nranks(); ++r) {
    EXPECT_FALSE(st[r].ok()) << "rank " << r;
    EXPECT_NE(st[r].message().find("aggregation tree carries only allreduce"), std::string::npos)
        << "rank " << r << ": " << st[r].ToString();
  }
}

// An inner server dies while collectives run: every rank, below it or elsewhere in the tree, gets
// an error well within the job timeout, and none hangs.
TEST(Tree, InnerServerKilledMidCollectiveFailsEveryRank) {
  const TreeShape shape = Depth3();
  server::ServerOptions o = TreeServerOptions();
  o.job_timeout = milliseconds(8000);
  TreeFarm farm;
  ASSERT_TRUE(farm.Start(shape.parent, o).ok());
  const JobId job = JobId::Random();
  std::atomic<int> done{0};
  std::vector<Status> st(shape.nranks());
  std::vector<Clock::time_point> failed_at(shape.nranks());
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.nranks(); ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm;
      e2e::CommConfig c = SmallChunks();
      c.timeout = milliseconds(20000);
      st[r] = e2e::MakeComm({farm.address(shape.rank_node[r])}, job, shape.nranks(), r, c, &comm);
      const size_t count = 1 << 16;
      std::vector<float> in(count, 1.0f), got(count);
      for (int i = 0; st[r].ok() && i < 100000; ++i) {
        st[r] = comm->AllReduce(in.data(), got.data(), count, DataType::kFloat32, RedOp::kSum);
        if (st[r].ok() && got[count - 1] != static_cast<float>(shape.nranks())) st[r] = InternalError("wrong sum");
        if (r == 0) done.store(i + 1);
      }
      failed_at[r] = Clock::now();
    });
  }
  const bool started = e2e::WaitFor([&] { return done.load() >= 3; }, milliseconds(30000));
  const auto killed_at = Clock::now();
  farm.Kill(1);  // the inner server above leaves 3 and 4
  for (auto& t : threads) t.join();
  ASSERT_TRUE(started) << "the tree never completed 3 collectives: " << st[0].ToString();
  for (int r = 0; r < shape.nranks(); ++r) {
    EXPECT_FALSE(st[r].ok()) << "rank " << r << " finished 100000 collectives without noticing";
    EXPECT_NE(st[r].code(), Code::kInternal) << "rank " << r << ": " << st[r].ToString();
    const auto waited = std::chrono::duration_cast<milliseconds>(failed_at[r] - killed_at);
    EXPECT_LT(waited.count(), o.job_timeout.count())
        << "rank " << r << " learned of the failure after " << waited.count() << " ms: " << st[r].ToString();
  }
}

}  // namespace
}  // namespace optcast::tree
