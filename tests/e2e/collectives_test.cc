// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Correctness of the collectives through real servers on loopback, ranks in separate processes.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "checks.h"
#include "harness.h"
#include "observe/metrics.h"

namespace optcast::e2e {
namespace {

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
                                  DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,    DataType::kUInt32,
                                  DataType::kInt64,   DataType::kUInt64};
constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax,
                             RedOp::kAvg, RedOp::kBand, RedOp::kBor, RedOp::kBxor};

std::string Context(const char* coll, DataType dt, RedOp op, size_t count, bool in_place) {
  return std::string(coll) + " " + DataTypeName(dt) + " " + RedOpName(op) + " count=" + std::to_string(count) +
         (in_place ? " in place" : "") + ": ";
}

// One all-reduce by this rank, checked against the reference. Returns "" or the failure.
std::string RunAllReduce(Communicator& comm, DataType dt, RedOp op, size_t count, uint64_t seed, bool in_place,
                         uint64_t* hash) {
  const int rank = comm.rank(), n = comm.nranks();
  const size_t bytes = count * DataTypeSize(dt);
  const std::string ctx = Context("allreduce", dt, op, count, in_place);
  GuardedBuffer send(bytes), recv(bytes);
  FillInput(dt, op, seed, rank, 0, count, send.data());
  void* dst = in_place ? send.data() : recv.data();
  Status st = comm.AllReduce(send.data(), dst, count, dt, op);
  if (!st.ok()) return ctx + st.ToString();
  std::string err = VerifyReduction(dst, dt, op, seed, n, 0, count);
  if (!err.empty()) return ctx + err;
  if (!send.GuardsIntact() || !recv.GuardsIntact()) return ctx + "wrote outside the buffers";
  if (!in_place) {
    GuardedBuffer again(bytes);
    FillInput(dt, op, seed, rank, 0, count, again.data());
    if (std::memcmp(again.data(), send.data(), bytes) != 0) return ctx + "modified the send buffer";
  }
  *hash = HashBytes(dst, bytes, *hash);
  return "";
}

// One reduce-scatter: every rank sends recvcount * nranks elements and gets its part.
std::string RunReduceScatter(Communicator& comm, DataType dt, RedOp op, size_t recvcount, uint64_t seed,
                             bool in_place) {
  const int rank = comm.rank(), n = comm.nranks();
  const size_t es = DataTypeSize(dt);
  const std::string ctx = Context("reducescatter", dt, op, recvcount, in_place);
  GuardedBuffer send(recvcount * n * es), recv(recvcount * es);
  FillInput(dt, op, seed, rank, 0, recvcount * n, send.data());
  uint8_t* dst = in_place ? send.data() + static_cast<size_t>(rank) * recvcount * es : recv.data();
  Status st = comm.ReduceScatter(send.data(), dst, recvcount, dt, op);
  if (!st.ok()) return ctx + st.ToString();
  std::string err = VerifyReduction(dst, dt, op, seed, n, static_cast<uint64_t>(rank) * recvcount, recvcount);
  if (!err.empty()) return ctx + err;
  if (!send.GuardsIntact() || !recv.GuardsIntact()) return ctx + "wrote outside the buffers";
  return "";
}

// One all-gather of sendcount elements per rank.
std::string RunAllGather(Communicator& comm, DataType dt, size_t sendcount, uint64_t seed, bool in_place,
                         uint64_t* hash) {
  const int rank = comm.rank(), n = comm.nranks();
  const size_t es = DataTypeSize(dt);
  const std::string ctx = Context("allgather", dt, RedOp::kSum, sendcount, in_place);
  GuardedBuffer send(sendcount * es), recv(sendcount * n * es);
  uint8_t* src = in_place ? recv.data() + static_cast<size_t>(rank) * sendcount * es : send.data();
  FillInput(dt, RedOp::kSum, seed, rank, 0, sendcount, src);
  Status st = comm.AllGather(src, recv.data(), sendcount, dt);
  if (!st.ok()) return ctx + st.ToString();
  std::string err = VerifyAllGather(recv.data(), dt, seed, n, sendcount);
  if (!err.empty()) return ctx + err;
  if (!send.GuardsIntact() || !recv.GuardsIntact()) return ctx + "wrote outside the buffers";
  *hash = HashBytes(recv.data(), recv.size(), *hash);
  return "";
}

// ---------------------------------------------------------------------------------------------

// Full dtype x op matrix with small odd counts (one chunk per server), then float32 sums of odd
// sizes including a multi-chunk one, then a second job with tiny chunks so that every message is
// cut into many pieces.
int AllReduceMatrixRank(Shared& sh, const std::vector<std::string>& servers, const JobId& job1, const JobId& job2,
                        int nranks, int rank) {
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(servers, job1, nranks, rank, CommConfig{}, &comm);
  if (!st.ok()) return sh.Fail(rank, "create: " + st.ToString());
  uint64_t h = 0;
  int k = 0;
  for (DataType dt : kAllTypes) {
    for (RedOp op : kAllOps) {
      if (!IsRedOpDefinedFor(op, dt)) continue;  // bitwise ops take integer types only
      // Up to 257 elements a collective fits on one server; 40000 elements are striped over both.
      for (size_t count : {1, 2, 3, 7, 64, 129, 257, 40000}) {
        const uint64_t seed = SeedFor(1, static_cast<uint64_t>(dt), static_cast<uint64_t>(op), count);
        std::string err = RunAllReduce(*comm, dt, op, count, seed, (k++ % 2) == 1, &h);
        if (!err.empty()) return sh.Fail(rank, err);
      }
    }
  }
  for (size_t count : {1, 3, 1000003}) {
    std::string err = RunAllReduce(*comm, DataType::kFloat32, RedOp::kSum, count, SeedFor(2, count), false, &h);
    if (!err.empty()) return sh.Fail(rank, err);
  }
  sh->hash[rank][0] = h;
  comm.reset();

  CommConfig tiny;
  tiny.chunk_bytes = 24;
  tiny.window = 3;
  st = MakeComm(servers, job2, nranks, rank, tiny, &comm);
  if (!st.ok()) return sh.Fail(rank, "create (tiny chunks): " + st.ToString());
  h = 0;
  const std::pair<DataType, RedOp> subset[] = {{DataType::kFloat32, RedOp::kSum},  {DataType::kFloat16, RedOp::kAvg},
                                               {DataType::kBFloat16, RedOp::kMax}, {DataType::kFloat64, RedOp::kProd},
                                               {DataType::kInt8, RedOp::kSum},     {DataType::kUInt64, RedOp::kAvg},
                                               {DataType::kInt32, RedOp::kMin},    {DataType::kUInt8, RedOp::kBor}};
  for (const auto& [dt, op] : subset) {
    for (size_t count : {1, 5, 31, 257}) {
      const uint64_t seed = SeedFor(3, static_cast<uint64_t>(dt), static_cast<uint64_t>(op), count);
      std::string err = RunAllReduce(*comm, dt, op, count, seed, (k++ % 2) == 1, &h);
      if (!err.empty()) return sh.Fail(rank, "tiny chunks: " + err);
    }
  }
  sh->hash[rank][1] = h;
  comm.reset();
  return 0;
}

// Every dtype and op on `lanes[i]` lanes for server i.
void RunAllReduceMatrix(const std::vector<int>& lanes) {
  ServerFarm farm;
  for (int l : lanes) E2E_ASSERT_OK(farm.Bind(1, WithLanes(l)));
  const auto servers = farm.addresses();
  const JobId job1 = JobId::Random(), job2 = JobId::Random();
  constexpr int kRanks = 4;
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) {
    kids.Spawn([&, r] { return AllReduceMatrixRank(sh, servers, job1, job2, kRanks, r); });
  }
  farm.Serve();
  ExpectChildrenOk(kids, sh);
  ExpectSameHash(sh, 0, kRanks, 0, "allreduce matrix");
  ExpectSameHash(sh, 0, kRanks, 1, "allreduce with tiny chunks");
  EXPECT_EQ(farm.WaitIdle(), "");
  for (size_t i = 0; i < lanes.size(); ++i) {
    const int expected = OverFabric() ? 1 : lanes[i];
    EXPECT_EQ(farm.server(static_cast<int>(i)).stats().lanes, static_cast<uint64_t>(expected)) << "server " << i;
    // Every lane carried chunks: the ranks striped over (server, lane) pairs.
    const std::string text = farm.server(static_cast<int>(i)).metrics().Render();
    for (int l = 0; l < expected; ++l) {
      const std::string series = "optcast_server_lane_received_bytes_total{lane=\"" + std::to_string(l) + "\"} ";
      const size_t at = text.find(series);
      ASSERT_NE(at, std::string::npos) << text;
      EXPECT_NE(text.substr(at + series.size(), 2), "0\n") << "server " << i << " lane " << l << " received nothing";
    }
  }
}

TEST(E2eAllReduce, EveryDtypeAndOpFourRanksTwoServers) { RunAllReduceMatrix({1, 1}); }
// Lanes (--io-threads): a server of k lanes serves like k servers behind one port.
TEST(E2eLanes, EveryDtypeAndOpOnTwoServersOfTwoLanes) { RunAllReduceMatrix({2, 2}); }
TEST(E2eLanes, EveryDtypeAndOpOnAServerOfThreeLanes) { RunAllReduceMatrix({3}); }
TEST(E2eLanes, EveryDtypeAndOpOnTwoLanesNextToOneLane) { RunAllReduceMatrix({2, 1}); }

// ---------------------------------------------------------------------------------------------

int RsAgRank(Shared& sh, const std::vector<std::string>& servers, const JobId& job1, const JobId& job2,
             const JobId& job3, int nranks, int rank) {
  const std::pair<DataType, RedOp> rs_cases[] = {
      {DataType::kFloat32, RedOp::kSum}, {DataType::kInt32, RedOp::kMax},    {DataType::kFloat16, RedOp::kAvg},
      {DataType::kUInt64, RedOp::kProd}, {DataType::kBFloat16, RedOp::kMin}, {DataType::kFloat64, RedOp::kAvg},
      {DataType::kInt8, RedOp::kSum},    {DataType::kUInt32, RedOp::kBxor},  {DataType::kInt64, RedOp::kBand}};
  const DataType ag_types[] = {DataType::kFloat32, DataType::kUInt8, DataType::kFloat64, DataType::kBFloat16,
                               DataType::kInt64};
  const JobId* jobs[3] = {&job1, &job2, &job3};
  for (int phase = 0; phase < 3; ++phase) {
    CommConfig cfg;
    std::vector<size_t> counts = {1, 3, 7, 129, 1001, 12289};  // 12289: striped over several servers
    if (phase == 1) {  // chunks far smaller than a segment: many chunks per segment and server
      cfg.chunk_bytes = 40;
      cfg.window = 2;
      counts = {1, 3, 7, 129, 1001};
    }
    if (phase == 2) {  // several servers and several chunks per shard, a small window
      cfg.chunk_bytes = 8192;
      cfg.window = 2;
      counts = {12289, 30011};
    }
    std::unique_ptr<Communicator> comm;
    Status st = MakeComm(servers, *jobs[phase], nranks, rank, cfg, &comm);
    if (!st.ok()) return sh.Fail(rank, "create: " + st.ToString());
    const std::string where = "phase " + std::to_string(phase) + ": ";
    uint64_t ag_hash = 0, ar_hash = 0;
    int k = 0;
    for (size_t count : counts) {
      for (const auto& [dt, op] : rs_cases) {
        const uint64_t seed = SeedFor(10 + phase, static_cast<uint64_t>(dt), static_cast<uint64_t>(op), count);
        std::string err = RunReduceScatter(*comm, dt, op, count, seed, (k++ % 2) == 0);
        if (!err.empty()) return sh.Fail(rank, where + err);
      }
      for (DataType dt : ag_types) {
        const uint64_t seed = SeedFor(20 + phase, static_cast<uint64_t>(dt), count);
        std::string err = RunAllGather(*comm, dt, count, seed, (k++ % 2) == 0, &ag_hash);
        if (!err.empty()) return sh.Fail(rank, where + err);
      }
      std::string err =
          RunAllReduce(*comm, DataType::kFloat32, RedOp::kSum, count * 3, SeedFor(30, count), true, &ar_hash);
      if (!err.empty()) return sh.Fail(rank, where + err);
    }
    // Zero-element collectives complete at once and do not disturb the sequence.
    uint8_t dummy[8] = {};
    st = comm->AllReduce(dummy, dummy, 0, DataType::kFloat32, RedOp::kSum);
    if (st.ok()) st = comm->ReduceScatter(dummy, dummy, 0, DataType::kInt32, RedOp::kMax);
    if (st.ok()) st = comm->AllGather(dummy, dummy, 0, DataType::kUInt8);
    if (!st.ok()) return sh.Fail(rank, where + "zero-element collective: " + st.ToString());
    std::string err = RunAllGather(*comm, DataType::kInt32, 11, SeedFor(40 + phase), false, &ag_hash);
    if (!err.empty()) return sh.Fail(rank, where + "after zero-element collectives: " + err);
    sh->hash[rank][2 * phase] = ag_hash;
    sh->hash[rank][2 * phase + 1] = ar_hash;
  }
  return 0;
}

void RunRsAg(int nranks, int nservers, int lanes = 1) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(nservers, WithLanes(lanes)));
  const auto servers = farm.addresses();
  const JobId job1 = JobId::Random(), job2 = JobId::Random(), job3 = JobId::Random();
  Shared sh;
  Children kids;
  for (int r = 0; r < nranks; ++r) {
    kids.Spawn([&, r] { return RsAgRank(sh, servers, job1, job2, job3, nranks, r); });
  }
  farm.Serve();
  ExpectChildrenOk(kids, sh);
  for (int k = 0; k < 6; ++k) ExpectSameHash(sh, 0, nranks, k, k % 2 == 0 ? "allgather" : "allreduce in place");
  EXPECT_EQ(farm.WaitIdle(), "");
}

TEST(E2eReduceScatterAllGather, ThreeRanksTwoServers) { RunRsAg(3, 2); }
TEST(E2eReduceScatterAllGather, FourRanksThreeServers) { RunRsAg(4, 3); }
TEST(E2eLanes, ReduceScatterAllGatherOnTwoServersOfTwoLanes) { RunRsAg(3, 2, 2); }
TEST(E2eLanes, ReduceScatterAllGatherOnAServerOfThreeLanes) { RunRsAg(4, 1, 3); }

// A rank that is slow to collect its result of one collective while the others already started
// an all-gather: the all-gather data forwarded to it must not break its communicator. Made
// deterministic by having rank 1 start collective #1 and read nothing until ranks 0 and 2 have
// finished #1 and issued the all-gather #2.
TEST(E2eAllGather, SlowRankStillCollectingThePreviousCollective) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2));
  const auto servers = farm.addresses();
  const JobId job = JobId::Random();
  constexpr int kRanks = 3, kSlow = 1;
  constexpr size_t kCount = 1001;
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) {
    kids.Spawn([&, r]() -> int {
      std::unique_ptr<Communicator> comm;
      CommConfig config;
      config.timeout = milliseconds(10000);
      Status st = MakeComm(servers, job, kRanks, r, config, &comm);
      if (!st.ok()) return sh.Fail(r, "create: " + st.ToString());
      const uint64_t s1 = SeedFor(90), s2 = SeedFor(91);
      std::vector<float> in(kCount), out(kCount);
      FillInput(DataType::kFloat32, RedOp::kSum, s1, r, 0, kCount, in.data());
      std::vector<int32_t> ag_in(kCount), ag_out(kCount * kRanks);
      FillInput(DataType::kInt32, RedOp::kSum, s2, r, 0, kCount, ag_in.data());
      if (r == kSlow) {
        Request* req = nullptr;
        st = comm->IAllReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum, &req);
        if (!st.ok()) return sh.Fail(r, "issue #1: " + st.ToString());
        const auto deadline = Clock::now() + milliseconds(10000);
        while (sh->flag[0].load() == 0 || sh->flag[2].load() == 0) {
          if (Clock::now() > deadline) return sh.Fail(r, "the other ranks never started the all-gather");
          std::this_thread::sleep_for(milliseconds(1));
        }
        std::this_thread::sleep_for(milliseconds(300));  // their all-gather chunks reach the servers
        st = comm->Wait(req);
        if (!st.ok()) return sh.Fail(r, "allreduce #1, collected late: " + st.ToString());
      } else {
        st = comm->AllReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum);
        if (!st.ok()) return sh.Fail(r, "allreduce #1: " + st.ToString());
      }
      std::string err = VerifyReduction(out.data(), DataType::kFloat32, RedOp::kSum, s1, kRanks, 0, kCount);
      if (!err.empty()) return sh.Fail(r, err);
      Request* ag = nullptr;
      st = comm->IAllGather(ag_in.data(), ag_out.data(), kCount, DataType::kInt32, &ag);
      if (!st.ok()) return sh.Fail(r, "issue all-gather #2: " + st.ToString());
      sh->flag[r] = 1;
      st = comm->Wait(ag);
      if (!st.ok()) return sh.Fail(r, "all-gather #2: " + st.ToString());
      err = VerifyAllGather(ag_out.data(), DataType::kInt32, s2, kRanks, kCount);
      if (!err.empty()) return sh.Fail(r, err);
      return 0;
    });
  }
  farm.Serve();
  ExpectChildrenOk(kids, sh, milliseconds(30000));
  EXPECT_EQ(farm.WaitIdle(), "");
}

// An all-gather as the very first collective, while one rank has not even connected yet: the
// data of the ranks that were early must still reach it. Ranks 0 and 1 issue the all-gather
// before rank 2 creates its communicator.
TEST(E2eAllGather, FirstCollectiveWithALateConnectingRank) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2));
  const auto servers = farm.addresses();
  const JobId job = JobId::Random();
  constexpr int kRanks = 3, kLate = 2;
  constexpr size_t kSmall = 777, kLarge = 40000;  // one server; both servers
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) {
    kids.Spawn([&, r]() -> int {
      if (r == kLate) {
        const auto deadline = Clock::now() + milliseconds(10000);
        while (sh->flag[0].load() == 0 || sh->flag[1].load() == 0) {
          if (Clock::now() > deadline) return sh.Fail(r, "the other ranks never started");
          std::this_thread::sleep_for(milliseconds(1));
        }
        std::this_thread::sleep_for(milliseconds(200));  // their chunks reach the servers first
      }
      std::unique_ptr<Communicator> comm;
      CommConfig config;
      config.timeout = milliseconds(5000);
      Status st = MakeComm(servers, job, kRanks, r, config, &comm);
      if (!st.ok()) return sh.Fail(r, "create: " + st.ToString());
      const uint64_t s1 = SeedFor(92), s2 = SeedFor(93);
      std::vector<int32_t> a_in(kSmall), a_out(kSmall * kRanks);
      std::vector<float> b_in(kLarge), b_out(kLarge * kRanks);
      FillInput(DataType::kInt32, RedOp::kSum, s1, r, 0, kSmall, a_in.data());
      FillInput(DataType::kFloat32, RedOp::kSum, s2, r, 0, kLarge, b_in.data());
      Request* a = nullptr;
      Request* b = nullptr;
      st = comm->IAllGather(a_in.data(), a_out.data(), kSmall, DataType::kInt32, &a);
      if (st.ok()) st = comm->IAllGather(b_in.data(), b_out.data(), kLarge, DataType::kFloat32, &b);
      if (!st.ok()) return sh.Fail(r, "issue: " + st.ToString());
      sh->flag[r] = 1;
      st = comm->Wait(a);
      if (!st.ok()) return sh.Fail(r, "all-gather #1: " + st.ToString());
      st = comm->Wait(b);
      if (!st.ok()) return sh.Fail(r, "all-gather #2: " + st.ToString());
      std::string err = VerifyAllGather(a_out.data(), DataType::kInt32, s1, kRanks, kSmall);
      if (err.empty()) err = VerifyAllGather(b_out.data(), DataType::kFloat32, s2, kRanks, kLarge);
      if (!err.empty()) return sh.Fail(r, err);
      return 0;
    });
  }
  farm.Serve();
  ExpectChildrenOk(kids, sh, milliseconds(30000));
  EXPECT_EQ(farm.WaitIdle(), "");
}

// ---------------------------------------------------------------------------------------------

TEST(E2eAllReduce, LargeMessagePipelined) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2));
  const auto servers = farm.addresses();
  const JobId job = JobId::Random();
  constexpr int kRanks = 4;
  constexpr size_t kCount = (size_t{64} << 20) / sizeof(float) + 3;  // 64 MiB and a ragged tail
  const uint64_t seed = SeedFor(50);
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) {
    kids.Spawn([&, r]() -> int {
      std::unique_ptr<Communicator> comm;
      Status st = MakeComm(servers, job, kRanks, r, CommConfig{}, &comm);
      if (!st.ok()) return sh.Fail(r, "create: " + st.ToString());
      std::vector<float> send(kCount), recv(kCount);
      FillInput(DataType::kFloat32, RedOp::kSum, seed, r, 0, kCount, send.data());
      const int64_t t0 = NowNs();
      st = comm->AllReduce(send.data(), recv.data(), kCount, DataType::kFloat32, RedOp::kSum);
      sh->t_ns[r][0] = NowNs() - t0;
      if (!st.ok()) return sh.Fail(r, "allreduce of 64 MiB: " + st.ToString());
      std::string err = VerifyReduction(recv.data(), DataType::kFloat32, RedOp::kSum, seed, kRanks, 0, kCount);
      if (!err.empty()) return sh.Fail(r, err);
      sh->hash[r][0] = HashBytes(recv.data(), kCount * sizeof(float));
      return 0;
    });
  }
  farm.Serve();
  ExpectChildrenOk(kids, sh);
  ExpectSameHash(sh, 0, kRanks, 0, "64 MiB allreduce");
  for (int r = 0; r < kRanks; ++r) {
    ::testing::Test::RecordProperty("rank" + std::to_string(r) + "_ms", std::to_string(sh->t_ns[r][0] / 1000000));
  }
  const auto stats = farm.server(0).stats();
  EXPECT_GT(stats.chunks_reduced, 1u) << "a 64 MiB message should be pipelined in several chunks per server";
  EXPECT_EQ(farm.WaitIdle(), "");
}

// ---------------------------------------------------------------------------------------------

// Four collectives in flight per communicator, completed only through Test, polled in an order
// that differs per rank.
int InFlightRank(Shared& sh, const std::vector<std::string>& servers, const JobId& job, int nranks, int rank,
                 const CommConfig& cfg, int round) {
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(servers, job, nranks, rank, cfg, &comm);
  if (!st.ok()) return sh.Fail(rank, "create: " + st.ToString());
  const size_t a_count = 100003, b_count = 777, c_count = 5001, d_count = 12345;
  const uint64_t sa = SeedFor(60, round, 1), sb = SeedFor(60, round, 2), sc = SeedFor(60, round, 3),
                 sd = SeedFor(60, round, 4);
  std::vector<float> a_send(a_count), a_recv(a_count);
  std::vector<int32_t> b_send(b_count), b_recv(b_count * nranks);
  std::vector<double> c_buf(c_count);
  std::vector<uint16_t> d_buf(d_count * nranks);
  FillInput(DataType::kFloat32, RedOp::kSum, sa, rank, 0, a_count, a_send.data());
  FillInput(DataType::kInt32, RedOp::kSum, sb, rank, 0, b_count, b_send.data());
  FillInput(DataType::kFloat64, RedOp::kMax, sc, rank, 0, c_count, c_buf.data());
  uint16_t* d_mine = d_buf.data() + static_cast<size_t>(rank) * d_count;
  FillInput(DataType::kBFloat16, RedOp::kSum, sd, rank, 0, d_count, d_mine);

  Request* req[4] = {};
  st = comm->IAllReduce(a_send.data(), a_recv.data(), a_count, DataType::kFloat32, RedOp::kSum, &req[0]);
  if (st.ok()) st = comm->IAllGather(b_send.data(), b_recv.data(), b_count, DataType::kInt32, &req[1]);
  if (st.ok()) st = comm->IAllReduce(c_buf.data(), c_buf.data(), c_count, DataType::kFloat64, RedOp::kMax, &req[2]);
  if (st.ok()) st = comm->IAllGather(d_mine, d_buf.data(), d_count, DataType::kBFloat16, &req[3]);
  if (!st.ok()) return sh.Fail(rank, "issue: " + st.ToString());
  for (Request* r : req) {
    if (r == nullptr) return sh.Fail(rank, "issue returned OK without a request");
  }
  const int orders[3][4] = {{3, 1, 2, 0}, {0, 1, 2, 3}, {2, 0, 3, 1}};
  const int* order = orders[rank % 3];
  bool done[4] = {};
  int remaining = 4;
  long polls = 0;
  const auto deadline = Clock::now() + milliseconds(30000);
  while (remaining > 0) {
    for (int j = 0; j < 4; ++j) {
      const int i = order[j];
      if (done[i]) continue;
      bool d = false;
      // Round 1 polls with a bounded wait (as the MPI interposer does), round 0 without.
      st = round == 1 ? comm->TestFor(req[i], milliseconds(2), &d) : comm->Test(req[i], &d);
      ++polls;
      if (!d && !st.ok())
        return sh.Fail(rank, "Test of request " + std::to_string(i) + " failed without completing: " + st.ToString());
      if (d) {
        if (!st.ok()) return sh.Fail(rank, "request " + std::to_string(i) + " failed: " + st.ToString());
        done[i] = true;
        --remaining;
      }
    }
    if (Clock::now() > deadline) {
      std::string which;
      for (int i = 0; i < 4; ++i) {
        if (!done[i]) which += " " + std::to_string(i);
      }
      return sh.Fail(rank, "round " + std::to_string(round) + ": requests" + which +
                               " (0: allreduce float32, 1: "
                               "allgather int32, 2: allreduce float64 in place, 3: allgather bfloat16 in place) still "
                               "pending after 30 s");
    }
  }
  sh->value[rank][round] = polls;
  std::string err = VerifyReduction(a_recv.data(), DataType::kFloat32, RedOp::kSum, sa, nranks, 0, a_count);
  if (err.empty()) err = VerifyAllGather(b_recv.data(), DataType::kInt32, sb, nranks, b_count);
  if (err.empty()) err = VerifyReduction(c_buf.data(), DataType::kFloat64, RedOp::kMax, sc, nranks, 0, c_count);
  if (err.empty()) err = VerifyAllGather(d_buf.data(), DataType::kBFloat16, sd, nranks, d_count);
  if (!err.empty()) return sh.Fail(rank, "round " + std::to_string(round) + ": " + err);
  uint64_t h = HashBytes(a_recv.data(), a_count * sizeof(float));
  h = HashBytes(b_recv.data(), b_recv.size() * sizeof(int32_t), h);
  h = HashBytes(c_buf.data(), c_count * sizeof(double), h);
  h = HashBytes(d_buf.data(), d_buf.size() * sizeof(uint16_t), h);
  sh->hash[rank][round] = h;
  // A blocking collective after the asynchronous ones still works.
  uint64_t h2 = 0;
  err = RunAllReduce(*comm, DataType::kInt64, RedOp::kSum, 1000, SeedFor(61, round), false, &h2);
  if (!err.empty()) return sh.Fail(rank, "after the asynchronous ones: " + err);
  return 0;
}

TEST(E2eAsync, SeveralCollectivesInFlightCompletedByTest) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2));
  const auto servers = farm.addresses();
  constexpr int kRanks = 3;
  CommConfig configs[2];
  configs[1].chunk_bytes = 4096;  // many chunks and a small window: sends queue behind each other
  configs[1].window = 2;
  const JobId jobs[2] = {JobId::Random(), JobId::Random()};
  Shared sh[2];
  Children kids[2];
  for (int round = 0; round < 2; ++round) {
    for (int r = 0; r < kRanks; ++r) {
      kids[round].Spawn(
          [&, r, round] { return InFlightRank(sh[round], servers, jobs[round], kRanks, r, configs[round], round); });
    }
  }
  farm.Serve();
  for (int round = 0; round < 2; ++round) {
    ExpectChildrenOk(kids[round], sh[round]);
    ExpectSameHash(sh[round], 0, kRanks, round, "collectives in flight");
    EXPECT_EQ(farm.WaitIdle(), "");
  }
}

// ---------------------------------------------------------------------------------------------

// The same float32 sum, twice in one job and once in each of two more jobs with other chunkings:
// bitwise identical everywhere, because servers combine in rank order.
TEST(E2eDeterminism, Float32SumBitwiseReproducible) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2));
  const auto servers = farm.addresses();
  constexpr int kRanks = 4;
  constexpr size_t kCount = 300007;
  const JobId job1 = JobId::Random(), job2 = JobId::Random(), job3 = JobId::Random();
  const uint64_t seed = SeedFor(70);
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) {
    kids.Spawn([&, r]() -> int {
      std::vector<float> input(kCount);
      FillInput(DataType::kFloat32, RedOp::kSum, seed, r, 0, kCount, input.data());
      // How many elements would differ if the ranks were summed in reverse order: the test only
      // has teeth if the order matters.
      std::vector<float> fwd(kCount);
      FillReference(DataType::kFloat32, RedOp::kSum, seed, kRanks, 0, kCount, fwd.data());
      std::vector<std::vector<float>> all(kRanks, std::vector<float>(kCount));
      for (int q = 0; q < kRanks; ++q) FillInput(DataType::kFloat32, RedOp::kSum, seed, q, 0, kCount, all[q].data());
      int64_t order_matters = 0;
      for (size_t i = 0; i < kCount; ++i) {
        float rev = all[kRanks - 1][i];
        for (int q = kRanks - 2; q >= 0; --q) rev += all[q][i];
        if (std::memcmp(&rev, &fwd[i], sizeof(float)) != 0) ++order_matters;
      }
      sh->value[r][0] = order_matters;

      CommConfig odd_chunks;  // other chunk boundaries, one chunk in flight at a time
      odd_chunks.chunk_bytes = 12288;
      odd_chunks.window = 1;
      const struct {
        const JobId* job;
        CommConfig cfg;
        int runs;
      } jobs[] = {{&job1, CommConfig{}, 2}, {&job2, CommConfig{}, 1}, {&job3, odd_chunks, 1}};
      int slot = 0;
      for (const auto& j : jobs) {
        const CommConfig& cfg = j.cfg;
        std::unique_ptr<Communicator> comm;
        Status st = MakeComm(servers, *j.job, kRanks, r, cfg, &comm);
        if (!st.ok()) return sh.Fail(r, "create: " + st.ToString());
        for (int run = 0; run < j.runs; ++run) {
          std::vector<float> buf = input;
          std::vector<float> out(kCount);
          const bool in_place = run == 1;
          st = comm->AllReduce(buf.data(), in_place ? buf.data() : out.data(), kCount, DataType::kFloat32, RedOp::kSum);
          if (!st.ok()) return sh.Fail(r, "allreduce: " + st.ToString());
          const float* res = in_place ? buf.data() : out.data();
          if (std::memcmp(res, fwd.data(), kCount * sizeof(float)) != 0) {
            return sh.Fail(r, "run " + std::to_string(slot) + ": " +
                                  VerifyReduction(res, DataType::kFloat32, RedOp::kSum, seed, kRanks, 0, kCount));
          }
          sh->hash[r][slot++] = HashBytes(res, kCount * sizeof(float));
        }
      }
      return 0;
    });
  }
  farm.Serve();
  ExpectChildrenOk(kids, sh);
  for (int slot = 0; slot < 4; ++slot) {
    ExpectSameHash(sh, 0, kRanks, slot, "determinism across ranks");
    EXPECT_EQ(Hex(sh->hash[0][slot]), Hex(sh->hash[0][0])) << "run " << slot << " differs from run 0";
  }
  EXPECT_GT(sh->value[0][0], 0) << "the data does not make float addition order-sensitive; the test is vacuous";
  EXPECT_EQ(farm.WaitIdle(), "");
}

// ---------------------------------------------------------------------------------------------

void RunConcurrentJobs(int lanes) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2, WithLanes(lanes)));
  const auto servers = farm.addresses();
  constexpr int kJobs = 4, kRanks = 3;
  std::vector<JobId> jobs;
  for (int j = 0; j < kJobs; ++j) jobs.push_back(JobId::Random());
  Shared sh;
  Children kids;
  for (int j = 0; j < kJobs; ++j) {
    for (int r = 0; r < kRanks; ++r) {
      const int slot = j * kRanks + r;
      kids.Spawn([&, j, r, slot]() -> int {
        std::unique_ptr<Communicator> comm;
        Status st = MakeComm(servers, jobs[j], kRanks, r, CommConfig{}, &comm);
        if (!st.ok()) return sh.Fail(slot, "create: " + st.ToString());
        // Start together so that the jobs really overlap on the servers.
        if (!sh.Barrier(0, kJobs * kRanks)) return sh.Fail(slot, "barrier timed out");
        uint64_t h = 0;
        const std::string job = "job " + std::to_string(j) + ": ";
        for (int iter = 0; iter < 3; ++iter) {
          std::string err =
              RunAllReduce(*comm, DataType::kFloat32, RedOp::kSum, 10007, SeedFor(80, j, iter), iter == 1, &h);
          if (err.empty())
            err = RunReduceScatter(*comm, DataType::kInt64, RedOp::kSum, 1001, SeedFor(81, j, iter), iter == 2);
          if (err.empty()) err = RunAllGather(*comm, DataType::kFloat16, 333, SeedFor(82, j, iter), iter == 0, &h);
          if (err.empty())
            err = RunAllReduce(*comm, DataType::kUInt8, RedOp::kMax, 99, SeedFor(83, j, iter), false, &h);
          if (!err.empty()) return sh.Fail(slot, job + err);
        }
        sh->hash[slot][0] = h;
        return 0;
      });
    }
  }
  farm.Serve();
  ExpectChildrenOk(kids, sh);
  for (int j = 0; j < kJobs; ++j) ExpectSameHash(sh, j * kRanks, kRanks, 0, "concurrent job");
  // Different jobs used different data.
  EXPECT_NE(sh->hash[0][0], sh->hash[kRanks][0]);
  EXPECT_EQ(farm.WaitIdle(), "");
}

TEST(E2eJobs, FourConcurrentJobsOfThreeRanksShareTwoServers) { RunConcurrentJobs(1); }
TEST(E2eLanes, FourConcurrentJobsOnTwoServersOfThreeLanes) { RunConcurrentJobs(3); }

}  // namespace
}  // namespace optcast::e2e
