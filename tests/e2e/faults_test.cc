// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Failures: ranks that disagree, ranks and servers that die, bytes that are not the protocol,
// servers that are not there. Every failure must reach every rank promptly, with a message that
// names it, and must leave the server serving other jobs with no memory held.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "checks.h"
#include "harness.h"
#include "raw_client.h"
#include "transport/message.h"
#include "wire/protocol.h"

namespace optcast::e2e {
namespace {

CommConfig FaultConfig() {
  CommConfig c;
  c.timeout = milliseconds(5000);
  c.connect_timeout = milliseconds(5000);
  return c;
}

// Waits (in the parent) until `flag[i]` is set for every i in `slots`.
bool WaitFlags(Shared& sh, std::initializer_list<int> slots, milliseconds limit = milliseconds(20000)) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    bool all = true;
    for (int s : slots) all = all && sh->flag[s].load() != 0;
    if (all) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
}

// A healthy job: allreduce, reduce-scatter and all-gather, verified.
int HealthyRank(Shared& sh, const std::vector<std::string>& servers, const JobId& job, int nranks, int rank, int slot,
                uint64_t seed) {
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(servers, job, nranks, rank, FaultConfig(), &comm);
  if (!st.ok()) return sh.Fail(slot, "create: " + st.ToString());
  const size_t count = 3001;
  std::vector<float> a(count), b(count);
  FillInput(DataType::kFloat32, RedOp::kSum, seed, rank, 0, count, a.data());
  st = comm->AllReduce(a.data(), b.data(), count, DataType::kFloat32, RedOp::kSum);
  if (!st.ok()) return sh.Fail(slot, "allreduce: " + st.ToString());
  std::string err = VerifyReduction(b.data(), DataType::kFloat32, RedOp::kSum, seed, nranks, 0, count);
  if (!err.empty()) return sh.Fail(slot, err);
  std::vector<int32_t> rs_in(count * nranks), rs_out(count);
  FillInput(DataType::kInt32, RedOp::kMax, seed + 1, rank, 0, rs_in.size(), rs_in.data());
  st = comm->ReduceScatter(rs_in.data(), rs_out.data(), count, DataType::kInt32, RedOp::kMax);
  if (!st.ok()) return sh.Fail(slot, "reducescatter: " + st.ToString());
  err = VerifyReduction(rs_out.data(), DataType::kInt32, RedOp::kMax, seed + 1, nranks,
                        static_cast<uint64_t>(rank) * count, count);
  if (!err.empty()) return sh.Fail(slot, err);
  std::vector<uint16_t> ag_in(count), ag_out(count * nranks);
  FillInput(DataType::kFloat16, RedOp::kSum, seed + 2, rank, 0, count, ag_in.data());
  st = comm->AllGather(ag_in.data(), ag_out.data(), count, DataType::kFloat16);
  if (!st.ok()) return sh.Fail(slot, "allgather: " + st.ToString());
  err = VerifyAllGather(ag_out.data(), DataType::kFloat16, seed + 2, nranks, count);
  if (!err.empty()) return sh.Fail(slot, err);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// (a) Ranks disagree.

enum class Disagree { kDataType, kCount, kOp };

void RunMismatch(Disagree kind, size_t count, std::initializer_list<const char*> words,
                 CommConfig config = FaultConfig()) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2));
  const auto servers = farm.addresses();
  constexpr int kRanks = 3;
  const JobId bad_job = JobId::Random(), good_job = JobId::Random();
  Shared sh, sh2;
  Children kids, next_kids;
  // The healthy job that follows, forked now and released later.
  for (int r = 0; r < kRanks; ++r) {
    next_kids.Spawn([&, r] { return HealthyRank(sh2, servers, good_job, kRanks, r, r, SeedFor(100)); });
  }
  {
    for (int r = 0; r < kRanks; ++r) {
      kids.Spawn([&, r]() -> int {
        std::unique_ptr<Communicator> comm;
        Status st = MakeComm(servers, bad_job, kRanks, r, config, &comm);
        if (!st.ok()) return sh.Fail(r, "create: " + st.ToString());
        // A good collective first: the disagreement is in the middle of a job.
        uint64_t h = 0;
        std::vector<float> warm(257), warm_out(257);
        FillInput(DataType::kFloat32, RedOp::kSum, 5, r, 0, warm.size(), warm.data());
        st = comm->AllReduce(warm.data(), warm_out.data(), warm.size(), DataType::kFloat32, RedOp::kSum);
        if (!st.ok()) return sh.Fail(r, "warm-up allreduce: " + st.ToString());
        (void)h;
        // Every rank has its warm-up result before anyone starts the bad collective (see
        // EarlierCollectiveSurvivesALaterMismatch for what happens otherwise).
        if (!sh.Barrier(1, kRanks, milliseconds(10000))) return sh.Fail(r, "warm-up barrier timed out");
        const bool odd = r == kRanks - 1;
        DataType dt = DataType::kFloat32;
        RedOp op = RedOp::kSum;
        size_t n = count;
        if (odd && kind == Disagree::kDataType) dt = DataType::kFloat16;
        if (odd && kind == Disagree::kCount) n = count + 1;
        if (odd && kind == Disagree::kOp) op = RedOp::kMax;
        // Declared after `comm`, so freed before it is destroyed: once the collective has
        // returned (even with an error) the library must not touch these buffers again.
        std::vector<uint8_t> send((count + 1) * 4, 1), recv((count + 1) * 4);
        const int64_t t0 = NowNs();
        st = comm->AllReduce(send.data(), recv.data(), n, dt, op);
        sh->t_ns[r][0] = NowNs() - t0;
        sh->value[r][0] = static_cast<int>(st.code());
        sh.Note(r, st.ToString());
        // Nobody hangs up before every rank has its answer, so that no rank can see a
        // disconnect in place of the mismatch.
        const bool met = sh.Barrier(0, kRanks, milliseconds(10000));
        if (st.ok()) return sh.Fail(r, "the mismatched allreduce succeeded");
        for (const char* w : words) {
          if (st.message().find(w) == std::string::npos) {
            return sh.Fail(r, "error does not mention '" + std::string(w) + "': " + st.ToString());
          }
        }
        // The communicator stays failed.
        Status again = comm->AllReduce(warm.data(), warm_out.data(), warm.size(), DataType::kFloat32, RedOp::kSum);
        if (again.ok()) return sh.Fail(r, "a collective after the failure succeeded");
        if (!met) return sh.Fail(r, "barrier timed out");
        return 0;
      });
    }
    farm.Serve();
    ExpectChildrenOk(kids, sh);
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(sh->value[r][0], static_cast<int>(Code::kMismatch)) << "rank " << r << ": " << sh.Message(r);
    EXPECT_LT(sh->t_ns[r][0], 5'000'000'000) << "rank " << r << " waited for the timeout instead";
  }
  ::testing::Test::RecordProperty("rank0_error", sh.Message(0));
  EXPECT_EQ(farm.WaitIdle(), "");
  uint64_t failed = 0;
  for (int i = 0; i < farm.size(); ++i) failed += farm.server(i).stats().jobs_failed;
  EXPECT_GE(failed, 1u);

  // The same servers serve the next job.
  ExpectChildrenOk(next_kids, sh2);
  EXPECT_EQ(farm.WaitIdle(), "");
}

TEST(E2eFaults, MismatchedDataTypeIsReportedToEveryRank) {
  RunMismatch(Disagree::kDataType, 1000, {"data type", "float16", "float32"});
}
TEST(E2eFaults, MismatchedCountIsReportedToEveryRank) {
  RunMismatch(Disagree::kCount, 1000, {"element count", "1000", "1001"});
}
TEST(E2eFaults, MismatchedOpIsReportedToEveryRank) { RunMismatch(Disagree::kOp, 1000, {"reduction op", "sum", "max"}); }
TEST(E2eFaults, MismatchedDataTypeInLargeMessageIsReportedToEveryRank) {
  // Several MiB per rank: the ranks are still sending when the server detects the disagreement.
  RunMismatch(Disagree::kDataType, size_t{4} << 20, {"data type"});
}
TEST(E2eFaults, MismatchedDataTypeWithADeepWindowIsReportedToEveryRank) {
  // More bytes in flight than the sockets hold: when the error arrives, chunks are still queued
  // in the client. The ranks free their buffers before destroying the communicator (allowed:
  // the collective has completed, with an error), so nothing may touch them afterwards.
  CommConfig deep = FaultConfig();
  deep.chunk_bytes = 1 << 20;
  deep.window = 16;
  RunMismatch(Disagree::kDataType, size_t{8} << 20, {"data type"}, deep);
}

// A collective that every server completed must not be reported failed on a rank that reads its
// results late, just because an error about a later collective is queued behind them. Rank 0
// issues #1 and reads nothing until ranks 1 and 2 have finished #1 and disagreed on #2.
TEST(E2eFaults, EarlierCollectiveSurvivesALaterMismatch) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2));
  const auto servers = farm.addresses();
  const JobId job = JobId::Random();
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1000;
  const uint64_t seed = SeedFor(130);
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) {
    kids.Spawn([&, r]() -> int {
      std::unique_ptr<Communicator> comm;
      Status st = MakeComm(servers, job, kRanks, r, FaultConfig(), &comm);
      if (!st.ok()) return sh.Fail(r, "create: " + st.ToString());
      std::vector<float> in(kCount + 1), out(kCount + 1);
      FillInput(DataType::kFloat32, RedOp::kSum, seed, r, 0, kCount, in.data());
      Status first, second;
      if (r == 0) {
        Request* req = nullptr;
        first = comm->IAllReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum, &req);
        if (!first.ok()) return sh.Fail(r, "issue #1: " + first.ToString());
        const auto deadline = Clock::now() + milliseconds(10000);
        while (sh->flag[1].load() == 0 || sh->flag[2].load() == 0) {
          if (Clock::now() > deadline) return sh.Fail(r, "ranks 1 and 2 never reached collective #2");
          std::this_thread::sleep_for(milliseconds(1));
        }
        // Both servers have seen the disagreement and queued their errors behind their results.
        std::this_thread::sleep_for(milliseconds(200));
        first = comm->Wait(req);
        second = comm->AllReduce(in.data(), out.data() + 1, kCount, DataType::kFloat32, RedOp::kSum);
      } else {
        first = comm->AllReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum);
        const size_t n = r == 2 ? kCount + 1 : kCount;
        if (first.ok()) second = comm->AllReduce(in.data(), in.data(), n, DataType::kFloat32, RedOp::kSum);
        sh->flag[r] = 1;
      }
      sh.Note(r, "#1: " + first.ToString() + " | #2: " + second.ToString());
      const bool met = sh.Barrier(0, kRanks, milliseconds(10000));
      if (!first.ok()) return sh.Fail(r, "collective #1 failed: " + first.ToString());
      std::string err = VerifyReduction(out.data(), DataType::kFloat32, RedOp::kSum, seed, kRanks, 0, kCount);
      if (!err.empty()) return sh.Fail(r, "collective #1: " + err);
      if (second.ok()) return sh.Fail(r, "collective #2 succeeded");
      if (second.code() != Code::kMismatch) return sh.Fail(r, "collective #2: " + second.ToString());
      if (!met) return sh.Fail(r, "barrier timed out");
      return 0;
    });
  }
  farm.Serve();
  ExpectChildrenOk(kids, sh, milliseconds(30000));
  EXPECT_EQ(farm.WaitIdle(), "");
}

// ---------------------------------------------------------------------------------------------
// (b) A rank dies in the middle of a collective.

enum class Death { kKilledByParent, kExitsItself };

void RunRankDeath(Death how) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2));
  const auto servers = farm.addresses();
  constexpr int kRanks = 3, kVictim = 2;
  constexpr size_t kCount = size_t{1} << 20;
  const JobId job = JobId::Random(), next = JobId::Random();
  Shared sh, sh2;
  Children kids, next_kids;
  // A healthy job for afterwards, forked now and released later.
  for (int r = 0; r < 2; ++r) {
    next_kids.Spawn([&, r] { return HealthyRank(sh2, servers, next, 2, r, r, SeedFor(110)); });
  }
  for (int r = 0; r < kRanks; ++r) {
    kids.Spawn([&, r]() -> int {
      // 64 KiB chunks; the victim keeps one chunk in flight per server, so it cannot hand its
      // whole contribution to the servers before it dies.
      CommConfig cfg = FaultConfig();
      cfg.chunk_bytes = 64 << 10;
      if (r == kVictim) cfg.window = 1;
      std::unique_ptr<Communicator> comm;
      Status st = MakeComm(servers, job, kRanks, r, cfg, &comm);
      if (!st.ok()) return sh.Fail(r, "create: " + st.ToString());
      std::vector<float> warm(1000), warm_out(1000);
      FillInput(DataType::kFloat32, RedOp::kSum, 9, r, 0, warm.size(), warm.data());
      st = comm->AllReduce(warm.data(), warm_out.data(), warm.size(), DataType::kFloat32, RedOp::kSum);
      if (!st.ok()) return sh.Fail(r, "warm-up allreduce: " + st.ToString());
      std::vector<float> send(kCount, 1.0f), recv(kCount);
      if (r == kVictim) {
        if (how == Death::kExitsItself) {
          // Start the collective, hand part of it to the servers, and vanish without a goodbye.
          Request* req = nullptr;
          st = comm->IAllReduce(send.data(), recv.data(), kCount, DataType::kFloat32, RedOp::kSum, &req);
          bool done = false;
          if (st.ok()) (void)comm->Test(req, &done);
          sh->flag[r] = 1;
          while (sh->flag[0].load() == 0 || sh->flag[1].load() == 0) usleep(1000);
          usleep(200 * 1000);
          sh->t_ns[r][1] = NowNs();
          _exit(3);
        }
        sh->flag[r] = 1;
        for (;;) pause();  // wait for SIGKILL
      }
      sh->flag[r] = 1;
      const int64_t t0 = NowNs();
      st = comm->AllReduce(send.data(), recv.data(), kCount, DataType::kFloat32, RedOp::kSum);
      sh->t_ns[r][0] = NowNs();
      sh->t_ns[r][2] = sh->t_ns[r][0] - t0;
      sh->value[r][0] = static_cast<int>(st.code());
      sh.Note(r, st.ToString());
      if (st.ok()) return sh.Fail(r, "the allreduce succeeded although rank 2 died");
      return 0;
    });
  }
  farm.Serve();
  kids.Start();
  ASSERT_TRUE(WaitFlags(sh, {0, 1, 2})) << sh.Message(0) << " | " << sh.Message(1) << " | " << sh.Message(2);
  int64_t t_death = 0;
  if (how == Death::kKilledByParent) {
    std::this_thread::sleep_for(milliseconds(300));  // the survivors are now waiting inside the collective
    t_death = NowNs();
    kids.Kill(kVictim, SIGKILL);
    const ChildResult victim = kids.Wait(kVictim);
    EXPECT_EQ(victim.signal, SIGKILL) << victim.Describe();
  } else {
    const ChildResult victim = kids.Wait(kVictim);
    EXPECT_TRUE(victim.exited && victim.exit_code == 3) << victim.Describe() << ": " << sh.Message(kVictim);
    t_death = sh->t_ns[kVictim][1];
  }
  std::vector<ChildResult> results = kids.WaitAll(milliseconds(30000));
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    EXPECT_TRUE(results[r].exited && results[r].exit_code == 0) << results[r].Describe() << ": " << sh.Message(r);
    const double latency_s = static_cast<double>(sh->t_ns[r][0] - t_death) / 1e9;
    EXPECT_LT(latency_s, 6.0) << "rank " << r << " learned of the death only after " << latency_s << " s";
    ::testing::Test::RecordProperty("rank" + std::to_string(r) + "_latency_ms",
                                    std::to_string(static_cast<int>(latency_s * 1000)));
    if (sh->value[r][0] == static_cast<int>(Code::kPeerFailed)) {
      // Usually names rank 2; a server that notices late may instead name a survivor that has
      // already left after hearing from the other server.
      EXPECT_NE(sh.Message(r).find("disconnected"), std::string::npos) << sh.Message(r);
    }
  }
  ::testing::Test::RecordProperty("rank0_error", sh.Message(0));
  // The failed job leaves nothing behind on the servers.
  EXPECT_EQ(farm.WaitIdle(milliseconds(5000)), "");
  for (int i = 0; i < farm.size(); ++i) EXPECT_GE(farm.server(i).stats().jobs_failed, 1u) << "server " << i;

  // And they still serve.
  ExpectChildrenOk(next_kids, sh2);
  EXPECT_EQ(farm.WaitIdle(), "");
}

TEST(E2eFaults, RankKilledMidCollectiveFailsSurvivorsPromptly) { RunRankDeath(Death::kKilledByParent); }
TEST(E2eFaults, RankExitingMidCollectiveFailsSurvivorsPromptly) { RunRankDeath(Death::kExitsItself); }

// ---------------------------------------------------------------------------------------------
// (c) Bytes that are not the protocol, next to a healthy job.

TEST(E2eFaults, ProtocolAbuseIsRefusedWhileAHealthyJobRuns) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  server::ServerOptions opts = TestServerOptions();
  opts.hello_timeout = milliseconds(1000);
  opts.max_payload = 1u << 20;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(1, opts));
  const auto servers = farm.addresses();
  const uint16_t port = farm.port(0);
  constexpr int kRanks = 2;
  const JobId healthy = JobId::Random();
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) {
    kids.Spawn([&, r]() -> int {
      std::unique_ptr<Communicator> comm;
      Status st = MakeComm(servers, healthy, kRanks, r, FaultConfig(), &comm);
      if (!st.ok()) return sh.Fail(r, "create: " + st.ToString());
      uint64_t h = 0;
      for (int iter = 0;; ++iter) {
        const uint64_t seed = SeedFor(120, iter);
        std::vector<float> a(4099), b(4099);
        FillInput(DataType::kFloat32, RedOp::kSum, seed, r, 0, a.size(), a.data());
        st = comm->AllReduce(a.data(), b.data(), a.size(), DataType::kFloat32, RedOp::kSum);
        if (!st.ok()) return sh.Fail(r, "iteration " + std::to_string(iter) + ": " + st.ToString());
        std::string err = VerifyReduction(b.data(), DataType::kFloat32, RedOp::kSum, seed, kRanks, 0, a.size());
        if (!err.empty()) return sh.Fail(r, "iteration " + std::to_string(iter) + ": " + err);
        h = HashBytes(b.data(), b.size() * sizeof(float), h);
        sh->flag[r] = 1;
        // Agree on stopping through the job itself, so every rank runs the same iterations.
        int32_t vote = sh->stop.load();
        st = comm->AllReduce(&vote, &vote, 1, DataType::kInt32, RedOp::kMax);
        if (!st.ok()) return sh.Fail(r, "vote: " + st.ToString());
        sh->value[r][0] = iter + 1;
        if (vote != 0) break;
        if (iter > 200000) return sh.Fail(r, "never told to stop");
      }
      sh->hash[r][0] = h;
      return 0;
    });
  }
  farm.Serve();
  kids.Start();
  ASSERT_TRUE(WaitFlags(sh, {0, 1})) << sh.Message(0) << " | " << sh.Message(1);
  const int64_t iters_before = sh->value[0][0];

  // Opened first, says nothing: dropped after the hello timeout.
  const int silent = RawConnect(port);
  ASSERT_GE(silent, 0);

  {  // Not our protocol at all.
    const int fd = RawConnect(port);
    const std::string http = "GET / HTTP/1.1\r\nHost: optcast\r\n\r\n";
    ASSERT_TRUE(SendRaw(fd, std::vector<uint8_t>(http.begin(), http.end())));
    ExpectErrorThenClose(fd, Code::kProtocol, {"magic"}, "http request");
    ::close(fd);
  }
  {  // A hello of another protocol version.
    const int fd = RawConnect(port);
    auto meta = HelloMeta(JobId::Random(), 2, 0);
    meta[0] = wire::kProtocolVersion + 1;
    ASSERT_TRUE(SendRaw(fd, Frame(meta, 0)));
    const std::string version = "version " + std::to_string(wire::kProtocolVersion + 1);
    ExpectErrorThenClose(fd, Code::kProtocol, {version.c_str()}, "wrong version");
    ::close(fd);
  }
  {  // A header announcing a payload far over the limit, before hello.
    const int fd = RawConnect(port);
    ASSERT_TRUE(SendRaw(fd, Frame(HelloMeta(JobId::Random(), 2, 0), uint64_t{1} << 40)));
    ExpectErrorThenClose(fd, Code::kProtocol, {"limit"}, "oversize payload before hello");
    ::close(fd);
  }
  {  // A header announcing a meta block over the limit.
    const int fd = RawConnect(port);
    std::vector<uint8_t> h = Frame(HelloMeta(JobId::Random(), 2, 0), 0);
    const uint32_t big = 1u << 20;
    std::memcpy(h.data() + 4, &big, 4);
    h.resize(transport::kFrameHeaderSize);
    ASSERT_TRUE(SendRaw(fd, h));
    ExpectErrorThenClose(fd, Code::kProtocol, {"header"}, "oversize meta");
    ::close(fd);
  }
  {  // Rank out of range.
    const int fd = RawConnect(port);
    ASSERT_TRUE(SendRaw(fd, Frame(HelloMeta(JobId::Random(), 2, 2), 0)));
    ExpectErrorThenClose(fd, Code::kInvalidArgument, {"rank 2", "out of range"}, "rank out of range");
    ::close(fd);
  }
  {  // nranks of zero.
    const int fd = RawConnect(port);
    ASSERT_TRUE(SendRaw(fd, Frame(HelloMeta(JobId::Random(), 0, 0), 0)));
    ExpectErrorThenClose(fd, Code::kInvalidArgument, {"nranks"}, "zero ranks");
    ::close(fd);
  }
  {  // A rank of the healthy job, claimed a second time: refused without disturbing the job.
    const int fd = RawConnect(port);
    ASSERT_TRUE(SendRaw(fd, Frame(HelloMeta(healthy, kRanks, 1), 0)));
    ExpectErrorThenClose(fd, Code::kInvalidArgument, {"rank 1", "already taken"}, "duplicate rank");
    ::close(fd);
  }
  {  // Data before hello.
    const int fd = RawConnect(port);
    wire::Chunk c;
    c.desc.count = 4;
    c.desc.server_elems = 4;
    c.ref.count = 4;
    ASSERT_TRUE(SendRaw(fd, Concat(Frame(wire::EncodeChunk(c), 16), std::vector<uint8_t>(16, 0))));
    ExpectErrorThenClose(fd, Code::kProtocol, {"hello"}, "chunk before hello");
    ::close(fd);
  }
  {  // A client sending a server's message.
    const int fd = RawConnect(port);
    ASSERT_TRUE(SendRaw(fd, Frame(wire::EncodeWelcome({1, 1}), 0)));
    ExpectErrorThenClose(fd, Code::kProtocol, {"may not send"}, "welcome from a client");
    ::close(fd);
  }
  {  // A raw rank of its own job: welcomed, then a chunk whose payload disagrees with its meta.
    const int fd = RawConnect(port);
    ASSERT_TRUE(SendRaw(fd, Frame(HelloMeta(JobId::Random(), 2, 0), 0)));
    const RawReply w = ReadReply(fd);
    ASSERT_EQ(w.kind, RawReply::kFrame) << w.detail;
    ASSERT_EQ(w.msg.type, wire::MsgType::kWelcome);
    EXPECT_EQ(w.msg.welcome.max_payload, opts.max_payload);
    EXPECT_EQ(w.msg.welcome.job_timeout_ms, static_cast<uint32_t>(opts.job_timeout.count()));
    wire::Chunk c;
    c.desc.coll_seq = 1;
    c.desc.count = 4;
    c.desc.server_elems = 4;
    c.ref.count = 4;  // 16 bytes of float32
    ASSERT_TRUE(SendRaw(fd, Concat(Frame(wire::EncodeChunk(c), 12), std::vector<uint8_t>(12, 0))));
    ExpectErrorThenClose(fd, Code::kProtocol, {"12 bytes", "16"}, "payload length disagreeing with the chunk");
    ::close(fd);
  }
  {  // A raw rank of its own job announcing a payload over the server's max_payload.
    const int fd = RawConnect(port);
    ASSERT_TRUE(SendRaw(fd, Frame(HelloMeta(JobId::Random(), 2, 1), 0)));
    const RawReply w = ReadReply(fd);
    ASSERT_EQ(w.kind, RawReply::kFrame) << w.detail;
    wire::Chunk c;
    c.desc.coll_seq = 1;
    c.desc.count = 1u << 30;
    c.desc.server_elems = 1u << 30;
    c.ref.count = 1u << 30;
    ASSERT_TRUE(SendRaw(fd, Frame(wire::EncodeChunk(c), uint64_t{4} << 30)));
    ExpectErrorThenClose(fd, Code::kProtocol, {"limit"}, "oversize chunk in a job");
    ::close(fd);
  }
  {  // Half a header, then gone: nothing to answer, nothing must break.
    const int fd = RawConnect(port);
    ASSERT_TRUE(SendRaw(fd, std::vector<uint8_t>(7, 0x4f)));
    ::close(fd);
  }
  ExpectErrorThenClose(silent, Code::kTimeout, {"no hello"}, "silent connection");
  ::close(silent);

  // The healthy job kept going through all of it, and finishes correctly.
  const auto t_wait = Clock::now();
  while (sh->value[0][0] < iters_before + 3 && Clock::now() - t_wait < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  sh->stop = 1;
  ExpectChildrenOk(kids, sh);
  EXPECT_GT(sh->value[0][0], iters_before) << "the healthy job made no progress during the abuse";
  EXPECT_EQ(sh->value[0][0], sh->value[1][0]);
  ExpectSameHash(sh, 0, kRanks, 0, "healthy job");
  ::testing::Test::RecordProperty("healthy_iterations", std::to_string(sh->value[0][0]));
  EXPECT_EQ(farm.WaitIdle(), "");
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (farm.server(0).stats().connections != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(farm.server(0).stats().connections, 0u) << "connections left open";
}

// ---------------------------------------------------------------------------------------------
// (d) No server there.

uint16_t UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);  // bound, never listening: connections are refused
  return ntohs(a.sin_port);
}

TEST(E2eFaults, UnreachableServerFailsWithinConnectTimeoutNamingAddress) {
  const uint16_t port = UnusedPort();
  ASSERT_NE(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  CommunicatorOptions o;
  o.servers = {address};
  o.job_id = JobId::Random();
  o.nranks = 2;
  o.rank = 0;
  o.connect_timeout = milliseconds(1000);
  o.timeout = milliseconds(1000);
  std::unique_ptr<Communicator> comm;
  const auto t0 = Clock::now();
  Status st = Communicator::Create(o, &comm);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find(address), std::string::npos) << st.ToString();
  EXPECT_GE(secs, 0.9) << "gave up before the connect timeout";
  EXPECT_LT(secs, 3.0) << "took far longer than the connect timeout";
}

TEST(E2eFaults, SecondServerUnreachableFailsAndReleasesTheFirst) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1));
  const uint16_t port = UnusedPort();
  ASSERT_NE(port, 0);
  const std::string dead = "127.0.0.1:" + std::to_string(port);
  CommunicatorOptions o;
  o.servers = {farm.addresses()[0], dead};
  o.job_id = JobId::Random();
  o.nranks = 2;
  o.rank = 1;
  o.connect_timeout = milliseconds(1000);
  o.timeout = milliseconds(1000);
  std::unique_ptr<Communicator> comm;
  const auto t0 = Clock::now();
  Status st = Communicator::Create(o, &comm);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dead), std::string::npos) << st.ToString();
  EXPECT_LT(secs, 3.0);
  EXPECT_EQ(farm.WaitIdle(), "") << "the half-made communicator left a job on the reachable server";
}

TEST(E2eFaults, InvalidOptionsAreRejectedBeforeConnecting) {
  CommunicatorOptions o;
  std::unique_ptr<Communicator> comm;
  Status st = Communicator::Create(o, &comm);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  o.servers = {"127.0.0.1:1"};
  o.nranks = 2;
  o.rank = 2;
  st = Communicator::Create(o, &comm);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("rank 2"), std::string::npos) << st.ToString();
  o.rank = 0;
  o.servers = {"not an address:99999"};
  o.connect_timeout = milliseconds(200);
  st = Communicator::Create(o, &comm);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("99999"), std::string::npos) << st.ToString();
}

// ---------------------------------------------------------------------------------------------
// A rank that never calls: whichever timeout comes first, the client's (which asks each server
// what it waits for) or the servers', the other ranks' errors name it.

// Three ranks over two servers, rank 1 never calling: what ranks 0 and 2 get, and how long it took.
struct StuckRankOutcome {
  std::vector<std::string> servers;
  std::vector<Status> got;  // ranks 0 and 2
  double secs = 0;
};

void RunWithRank1Stuck(milliseconds server_timeout, milliseconds client_timeout, StuckRankOutcome* o) {
  server::ServerOptions opts = TestServerOptions();
  opts.job_timeout = server_timeout;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(2, opts));
  o->servers = farm.addresses();
  const JobId job = JobId::Random();
  constexpr int kRanks = 3;
  CommConfig config = FaultConfig();
  config.timeout = client_timeout;
  std::vector<std::unique_ptr<Communicator>> comms(kRanks);
  for (int r = 0; r < kRanks; ++r) E2E_ASSERT_OK(MakeComm(o->servers, job, kRanks, r, config, &comms[r]));
  constexpr size_t kCount = size_t{1} << 16;  // 256 KiB of float32: striped over both servers
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(kCount, 1.0f));
  std::vector<std::vector<float>> out(kRanks, std::vector<float>(kCount));
  auto call = [&](int r) {
    return comms[r]->AllReduce(in[r].data(), out[r].data(), kCount, DataType::kFloat32, RedOp::kSum);
  };
  const auto t0 = Clock::now();
  auto rank0 = std::async(std::launch::async, call, 0);
  auto rank2 = std::async(std::launch::async, call, 2);  // rank 1 never calls
  o->got = {rank0.get(), rank2.get()};
  o->secs = std::chrono::duration<double>(Clock::now() - t0).count();
  comms.clear();
  EXPECT_EQ(farm.WaitIdle(), "");
}

TEST(E2eFaults, AClientTimeoutNamesTheRankEachServerWaitsFor) {
  StuckRankOutcome o;
  // The client's timeout short, but long enough for the hellos (which wait as long) on a loaded
  // machine under TSan; the servers' far away.
  ASSERT_NO_FATAL_FAILURE(RunWithRank1Stuck(milliseconds(60000), milliseconds(3000), &o));
  for (const Status& st : o.got) {
    EXPECT_EQ(st.code(), Code::kTimeout) << st.ToString();
    for (const std::string& address : o.servers) {
      EXPECT_NE(st.message().find("server " + address + " is still waiting for rank(s) 1;"), std::string::npos)
          << st.ToString();
    }
    EXPECT_NE(st.message().find("made no progress for 3000 ms"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("a rank may be stuck or dead"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("OPTCAST_TIMEOUT_MS"), std::string::npos) << st.ToString();
  }
  // The timeout, then the servers' answers (at most 2 s more); far from their own 60 s.
  EXPECT_GE(o.secs, 2.9);
  EXPECT_LT(o.secs, 20.0);
}

// The same stuck rank when the servers' job timeout comes first: each server fails the job
// naming the rank it waits for, and the other ranks get that error long before their own timeout.
TEST(E2eFaults, AServerTimeoutNamesTheRankItWaitsFor) {
  StuckRankOutcome o;
  ASSERT_NO_FATAL_FAILURE(RunWithRank1Stuck(milliseconds(1500), milliseconds(30000), &o));
  for (const Status& st : o.got) {
    EXPECT_EQ(st.code(), Code::kTimeout) << st.ToString();
    EXPECT_NE(st.message().find("made no progress for 1500 ms; still waiting for rank(s) 1;"), std::string::npos)
        << st.ToString();
    EXPECT_NE(st.message().find("a rank may be stuck or dead"), std::string::npos) << st.ToString();
  }
  EXPECT_GE(o.secs, 1.4);
  EXPECT_LT(o.secs, 15.0) << "the servers' 1.5 s timeout, not the ranks' 30 s, should end it";
}

// ---------------------------------------------------------------------------------------------
// (e) A server dies in the middle of a collective.

TEST(E2eFaults, ServerKilledMidCollectiveFailsRanksPromptly) {
  Shared sh;
  Children kids;
  const int server_child = kids.Spawn([&]() -> int {
    server::Server s(TestServerOptions());
    Status st = s.Start();
    if (!st.ok()) return sh.Fail(0, "server start: " + st.ToString());
    sh->port = s.port();
    st = s.Run();
    return st.ok() ? 0 : sh.Fail(0, "server run: " + st.ToString());
  });
  kids.Start();  // no server threads in this process: later forks are safe at any time
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (sh->port.load() == 0 && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(2));
  ASSERT_NE(sh->port.load(), 0) << sh.Message(0);
  const std::string address = "127.0.0.1:" + std::to_string(sh->port.load());
  const std::vector<std::string> servers = {address};
  const JobId job = JobId::Random();
  constexpr int kRanks = 2;
  constexpr size_t kCount = size_t{2} << 20;  // 8 MiB of float32
  for (int r = 0; r < kRanks; ++r) {
    const int slot = r + 1;
    kids.Spawn([&, r, slot]() -> int {
      std::unique_ptr<Communicator> comm;
      Status st = MakeComm(servers, job, kRanks, r, FaultConfig(), &comm);
      if (!st.ok()) return sh.Fail(slot, "create: " + st.ToString());
      std::vector<float> send(kCount, 0.5f), recv(kCount);
      const auto give_up = Clock::now() + std::chrono::seconds(60);
      for (int iter = 0; Clock::now() < give_up; ++iter) {
        st = comm->AllReduce(send.data(), recv.data(), kCount, DataType::kFloat32, RedOp::kSum);
        if (!st.ok()) {
          sh->t_ns[slot][0] = NowNs();
          sh->value[slot][0] = iter;
          sh.Note(slot, st.ToString());
          return 0;
        }
        if (recv[0] != 1.0f || recv[kCount - 1] != 1.0f) return sh.Fail(slot, "wrong sum");
        sh->flag[slot] = 1;
      }
      return sh.Fail(slot, "the collectives kept succeeding");
    });
  }
  kids.Start();
  ASSERT_TRUE(WaitFlags(sh, {1, 2})) << sh.Message(1) << " | " << sh.Message(2);
  std::this_thread::sleep_for(milliseconds(100));
  const int64_t t_kill = NowNs();
  kids.Kill(server_child, SIGKILL);
  const ChildResult srv = kids.Wait(server_child);
  EXPECT_EQ(srv.signal, SIGKILL) << srv.Describe() << ": " << sh.Message(0);
  const std::vector<ChildResult> results = kids.WaitAll(milliseconds(30000));
  for (int slot = 1; slot <= kRanks; ++slot) {
    EXPECT_TRUE(results[slot].exited && results[slot].exit_code == 0)
        << results[slot].Describe() << ": " << sh.Message(slot);
    const double latency_s = static_cast<double>(sh->t_ns[slot][0] - t_kill) / 1e9;
    EXPECT_LT(latency_s, 6.0) << "rank " << slot - 1 << " learned of the death only after " << latency_s << " s";
    EXPECT_NE(sh.Message(slot).find(address), std::string::npos) << sh.Message(slot);
    ::testing::Test::RecordProperty("rank" + std::to_string(slot - 1) + "_latency_ms",
                                    std::to_string(static_cast<int>(latency_s * 1000)));
  }
  ::testing::Test::RecordProperty("rank0_error", sh.Message(1));
}

}  // namespace
}  // namespace optcast::e2e
