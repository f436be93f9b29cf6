// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// `optcast server` as a process: graceful SIGTERM, secrets from files, loopback-only without a
// secret, and a restart that serves new communicators.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <future>
#include <thread>

#include "checks.h"
#include "harness.h"
#include "server_process.h"

namespace optcast::daemon {
namespace {

using e2e::CommConfig;
using e2e::ExpectAllOk;
using e2e::RunAllReduceOnThreads;
using std::chrono::milliseconds;

CommConfig Config(std::string secret = "") {
  CommConfig c;
  c.timeout = milliseconds(8000);
  c.connect_timeout = milliseconds(3000);
  c.secret = std::move(secret);
  return c;
}

std::string TempPath(const std::string& name) {
  return testing::TempDir() + "optcast-daemon-" + std::to_string(::getpid()) + "-" + name;
}

std::string WriteFile(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = TempPath(name);
  ::unlink(path.c_str());
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(Daemon, SigtermLetsTheCollectiveInFlightFinishThenExitsZero) {
  ServerProcess srv;
  E2E_ASSERT_OK(srv.Start({"--listen", "127.0.0.1:0", "--shutdown-timeout-ms", "20000"}));
  const JobId job = JobId::Random();
  std::unique_ptr<Communicator> c0, c1;
  E2E_ASSERT_OK(e2e::MakeComm({srv.address()}, job, 2, 0, Config(), &c0));
  E2E_ASSERT_OK(e2e::MakeComm({srv.address()}, job, 2, 1, Config(), &c1));
  constexpr size_t kCount = 1 << 20;
  constexpr uint64_t kSeed = 9200;
  std::vector<float> in0(kCount), in1(kCount), out0(kCount), out1(kCount);
  e2e::FillInput(DataType::kFloat32, RedOp::kSum, kSeed, 0, 0, kCount, in0.data());
  e2e::FillInput(DataType::kFloat32, RedOp::kSum, kSeed, 1, 0, kCount, in1.data());
  auto rank0 = std::async(std::launch::async, [&] {
    return c0->AllReduce(in0.data(), out0.data(), kCount, DataType::kFloat32, RedOp::kSum);
  });
  // Rank 0's chunks are at the server (rank 1 has not started): the collective is in flight.
  std::this_thread::sleep_for(milliseconds(300));
  srv.Signal(SIGTERM);
  std::this_thread::sleep_for(milliseconds(200));
  E2E_EXPECT_OK(c1->AllReduce(in1.data(), out1.data(), kCount, DataType::kFloat32, RedOp::kSum));
  E2E_EXPECT_OK(rank0.get());
  EXPECT_EQ(e2e::VerifyReduction(out0.data(), DataType::kFloat32, RedOp::kSum, kSeed, 2, 0, kCount), "");
  EXPECT_EQ(e2e::VerifyReduction(out1.data(), DataType::kFloat32, RedOp::kSum, kSeed, 2, 0, kCount), "");
  int code = -1;
  ASSERT_TRUE(srv.Wait(milliseconds(10000), &code)) << "still running after SIGTERM: " << srv.Output();
  EXPECT_EQ(code, 0) << srv.Output();
  EXPECT_NE(srv.Output().find("shutting down"), std::string::npos) << srv.Output();
  // One signal was sent: nothing may claim a second.
  EXPECT_EQ(srv.Output().find("second signal"), std::string::npos) << srv.Output();
  // The ranks learn that the server is gone rather than hang.
  Status next = c0->AllReduce(in0.data(), out0.data(), 8, DataType::kFloat32, RedOp::kSum);
  EXPECT_FALSE(next.ok());
}

TEST(Daemon, ASecondSignalStopsAServerThatIsStillDraining) {
  ServerProcess srv;
  E2E_ASSERT_OK(srv.Start({"--listen", "127.0.0.1:0", "--shutdown-timeout-ms", "60000"}));
  const JobId job = JobId::Random();
  std::unique_ptr<Communicator> c0;
  E2E_ASSERT_OK(e2e::MakeComm({srv.address()}, job, 2, 0, Config(), &c0));
  std::vector<float> in(4096, 1.0f), out(4096);
  // Rank 1 never comes: the drain would wait its full minute for this collective.
  auto rank0 = std::async(std::launch::async, [&] {
    return c0->AllReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
  });
  std::this_thread::sleep_for(milliseconds(300));
  srv.Signal(SIGTERM);
  std::this_thread::sleep_for(milliseconds(300));
  int code = -1;
  EXPECT_FALSE(srv.Wait(milliseconds(200), &code)) << "exited before its drain ended: " << srv.Output();
  EXPECT_EQ(srv.Output().find("second signal"), std::string::npos) << srv.Output();
  srv.Signal(SIGINT);
  ASSERT_TRUE(srv.Wait(milliseconds(10000), &code)) << "still running after a second signal: " << srv.Output();
  EXPECT_NE(srv.Output().find("second signal (SIGINT): stopping now"), std::string::npos) << srv.Output();
  EXPECT_FALSE(rank0.get().ok());
}

TEST(Daemon, AClientTimeoutNamesAFrozenServer) {
  ServerProcess srv;
  E2E_ASSERT_OK(srv.Start({"--listen", "127.0.0.1:0", "--timeout-ms", "60000"}));
  CommConfig config = Config();
  config.timeout = milliseconds(3000);  // the hello waits as long: leave room on a loaded machine
  // With failover on, a server that sends no heartbeat for the heartbeat bound counts as dead before
  // the client's timeout (E2eFailover.FrozenServerIsDroppedWithinTheHeartbeatBound); here, with
  // failover off, the client's own timeout asks the frozen server.
  config.failover = false;
  std::unique_ptr<Communicator> comm;
  E2E_ASSERT_OK(e2e::MakeComm({srv.address()}, JobId::Random(), 1, 0, config, &comm));
  srv.Signal(SIGSTOP);  // answers nothing from here on, the question included
  std::vector<float> in(4096, 1.0f), out(4096);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = comm->AllReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  srv.Signal(SIGCONT);
  EXPECT_EQ(st.code(), Code::kTimeout) << st.ToString();
  EXPECT_NE(st.message().find("server " + srv.address() +
                              " did not say which ranks it waits for within 2000 ms; that server may be stuck"),
            std::string::npos)
      << st.ToString();
  EXPECT_GE(secs, 4.9);  // the timeout, then the wait for an answer (2 s at most)
  EXPECT_LT(secs, 20.0);
}

TEST(Daemon, WithoutASecretItRefusesToServeTheNetworkUnlessInsecure) {
  {
    ServerProcess srv;
    Status st = srv.Start({"--listen", "0.0.0.0:0"});
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("--insecure"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("OPTCAST_SECRET_FILE"), std::string::npos) << st.ToString();
  }
  {
    ServerProcess srv;
    E2E_ASSERT_OK(srv.Start({"--listen", "0.0.0.0:0", "--insecure"}));
    EXPECT_NE(srv.Output().find("INSECURE"), std::string::npos) << srv.Output();
    srv.Signal(SIGTERM);
    int code = -1;
    ASSERT_TRUE(srv.Wait(milliseconds(5000), &code));
    EXPECT_EQ(code, 0) << srv.Output();
  }
}

TEST(Daemon, SecretFileIsCheckedThenRequiredOfEveryHello) {
  const std::string secret = "d2b1f0c8a4e6-a-secret-for-this-test";
  {  // Readable by others: refused, with the fix.
    const std::string open_file = WriteFile("open-secret", secret + "\n", 0644);
    ServerProcess srv;
    Status st = srv.Start({"--listen", "127.0.0.1:0", "--secret-file", open_file});
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("chmod 600"), std::string::npos) << st.ToString();
    ::unlink(open_file.c_str());
  }
  {  // Too short.
    const std::string short_file = WriteFile("short-secret", "abc\n", 0600);
    ServerProcess srv;
    Status st = srv.Start({"--listen", "127.0.0.1:0", "--secret-file", short_file});
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("at least 16"), std::string::npos) << st.ToString();
    ::unlink(short_file.c_str());
  }
  // A good file, given through the environment as workers would.
  const std::string file = WriteFile("secret", secret + "\n", 0600);
  ServerProcess srv;
  E2E_ASSERT_OK(srv.Start({"--listen", "127.0.0.1:0"}, {"OPTCAST_SECRET_FILE=" + file}));
  EXPECT_NE(srv.Output().find("authenticated"), std::string::npos) << srv.Output();
  ExpectAllOk(RunAllReduceOnThreads({srv.address()}, 2, 4099, Config(secret), 9201));
  const auto refused = RunAllReduceOnThreads({srv.address()}, 1, 16, Config(secret + "x"), 9202);
  EXPECT_EQ(refused[0].code(), Code::kUnauthenticated) << refused[0].ToString();
  ::unlink(file.c_str());
}

TEST(Daemon, ARestartedServerServesNewCommunicators) {
  ServerProcess first;
  E2E_ASSERT_OK(first.Start({"--listen", "127.0.0.1:0"}));
  const uint16_t port = first.port();
  ExpectAllOk(RunAllReduceOnThreads({first.address()}, 2, 10007, Config(), 9203));
  first.Signal(SIGKILL);
  int code = -1;
  ASSERT_TRUE(first.Wait(milliseconds(5000), &code));
  ServerProcess second;
  E2E_ASSERT_OK(second.Start({"--listen", "127.0.0.1:" + std::to_string(port)}));
  ExpectAllOk(RunAllReduceOnThreads({second.address()}, 3, 10007, Config(), 9204));
}

// A communicator does not re-stripe over the servers that are left: once one of its servers is
// gone, every later collective fails promptly with an error naming it, and a new communicator
// over the remaining servers works.
// Two `optcast server` processes and the two ranks of one job striped over both.
struct TwoServersOneJob {
  ServerProcess a, b;
  std::unique_ptr<Communicator> c0, c1;

  void Start(const CommConfig& config) {
    E2E_ASSERT_OK(a.Start({"--listen", "127.0.0.1:0"}));
    E2E_ASSERT_OK(b.Start({"--listen", "127.0.0.1:0"}));
    const JobId job = JobId::Random();
    E2E_ASSERT_OK(e2e::MakeComm({a.address(), b.address()}, job, 2, 0, config, &c0));
    E2E_ASSERT_OK(e2e::MakeComm({a.address(), b.address()}, job, 2, 1, config, &c1));
  }
};

TEST(Daemon, WithFailoverOffWhenOneOfTwoServersDiesLaterCollectivesFailNamingIt) {
  TwoServersOneJob j;
  e2e::CommConfig config = Config();
  config.failover = false;
  ASSERT_NO_FATAL_FAILURE(j.Start(config));
  // Named references, not a structured binding: lambdas below capture them.
  ServerProcess& a = j.a;
  ServerProcess& b = j.b;
  std::unique_ptr<Communicator>& c0 = j.c0;
  std::unique_ptr<Communicator>& c1 = j.c1;
  constexpr size_t kCount = 1 << 18;  // large enough to be striped over both servers
  std::vector<float> in(kCount, 1.0f), out0(kCount), out1(kCount);
  auto both = [&](size_t count) {
    auto r1 = std::async(std::launch::async,
                         [&] { return c1->AllReduce(in.data(), out1.data(), count, DataType::kFloat32, RedOp::kSum); });
    Status s0 = c0->AllReduce(in.data(), out0.data(), count, DataType::kFloat32, RedOp::kSum);
    return std::make_pair(s0, r1.get());
  };
  auto [ok0, ok1] = both(kCount);
  E2E_ASSERT_OK(ok0);
  E2E_ASSERT_OK(ok1);
  EXPECT_EQ(out0[kCount - 1], 2.0f);

  b.Signal(SIGKILL);
  int code = -1;
  ASSERT_TRUE(b.Wait(milliseconds(5000), &code));
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t count : {kCount, size_t{1}}) {
    auto [s0, s1] = both(count);
    for (const Status& st : {s0, s1}) {
      EXPECT_FALSE(st.ok()) << count;
      EXPECT_NE(st.message().find(b.address()), std::string::npos) << st.ToString();
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(10000));
  // The survivors start over on the server that is left.
  ExpectAllOk(RunAllReduceOnThreads({a.address()}, 2, kCount, Config(), 9205));
}

TEST(Daemon, WhenOneOfTwoServersDiesTheJobGoesOnOverTheOther) {
  TwoServersOneJob j;
  ASSERT_NO_FATAL_FAILURE(j.Start(Config()));
  // Named references, not a structured binding: lambdas below capture them.
  ServerProcess& a = j.a;
  ServerProcess& b = j.b;
  std::unique_ptr<Communicator>& c0 = j.c0;
  std::unique_ptr<Communicator>& c1 = j.c1;
  constexpr size_t kCount = 1 << 18;  // large enough to be striped over both servers
  std::vector<float> in0(kCount), in1(kCount), out0(kCount), out1(kCount);
  auto both = [&](size_t count, uint64_t seed) {
    e2e::FillInput(DataType::kFloat32, RedOp::kSum, seed, 0, 0, count, in0.data());
    e2e::FillInput(DataType::kFloat32, RedOp::kSum, seed, 1, 0, count, in1.data());
    auto r1 = std::async(std::launch::async, [&] {
      return c1->AllReduce(in1.data(), out1.data(), count, DataType::kFloat32, RedOp::kSum);
    });
    Status s0 = c0->AllReduce(in0.data(), out0.data(), count, DataType::kFloat32, RedOp::kSum);
    Status s1 = r1.get();
    E2E_EXPECT_OK(s0);
    E2E_EXPECT_OK(s1);
    EXPECT_EQ(e2e::VerifyReduction(out0.data(), DataType::kFloat32, RedOp::kSum, seed, 2, 0, count), "");
    EXPECT_EQ(e2e::VerifyReduction(out1.data(), DataType::kFloat32, RedOp::kSum, seed, 2, 0, count), "");
  };
  both(kCount, 9301);
  b.Signal(SIGKILL);
  int code = -1;
  ASSERT_TRUE(b.Wait(milliseconds(5000), &code));
  for (size_t count : {kCount, size_t{1}, kCount}) both(count, 9302 + count);
  EXPECT_EQ(c0->failover_stats().failovers, 1u);
  EXPECT_EQ(c1->failover_stats().servers_left, 1u);
}

// A rank that learns of a server's death late: rank 0 runs into it and waits for the failover,
// which needs every rank's report; rank 1 calls only a second later, catches up on what it
// missed, and both finish with exact results on the server left.
TEST(Daemon, ARankThatSawAServerDieLateCatchesUpWithoutDeadlock) {
  TwoServersOneJob j;
  ASSERT_NO_FATAL_FAILURE(j.Start(Config()));
  // Named references, not a structured binding: lambdas below capture them.
  ServerProcess& b = j.b;
  std::unique_ptr<Communicator>& c0 = j.c0;
  std::unique_ptr<Communicator>& c1 = j.c1;
  constexpr size_t kCount = 1 << 18;  // striped over both servers
  std::vector<float> in0(kCount), in1(kCount), out0(kCount), out1(kCount);
  e2e::FillInput(DataType::kFloat32, RedOp::kSum, 9401, 0, 0, kCount, in0.data());
  e2e::FillInput(DataType::kFloat32, RedOp::kSum, 9401, 1, 0, kCount, in1.data());
  auto r1 = std::async(std::launch::async,
                       [&] { return c1->AllReduce(in1.data(), out1.data(), kCount, DataType::kFloat32, RedOp::kSum); });
  E2E_ASSERT_OK(c0->AllReduce(in0.data(), out0.data(), kCount, DataType::kFloat32, RedOp::kSum));
  E2E_ASSERT_OK(r1.get());

  b.Signal(SIGKILL);
  int code = -1;
  ASSERT_TRUE(b.Wait(milliseconds(5000), &code));
  e2e::FillInput(DataType::kFloat32, RedOp::kSum, 9402, 0, 0, kCount, in0.data());
  e2e::FillInput(DataType::kFloat32, RedOp::kSum, 9402, 1, 0, kCount, in1.data());
  const auto t0 = std::chrono::steady_clock::now();
  auto r0 = std::async(std::launch::async,
                       [&] { return c0->AllReduce(in0.data(), out0.data(), kCount, DataType::kFloat32, RedOp::kSum); });
  // Rank 0 finds the server dead and reports it within this second; it cannot finish alone, and
  // the failover waits for rank 1's report. Rank 1 has heard nothing yet: it stripes its call over
  // both servers, finds one dead, and must catch up on the failover rank 0 asked for.
  EXPECT_EQ(r0.wait_for(milliseconds(1000)), std::future_status::timeout) << "finished without rank 1";
  E2E_EXPECT_OK(c1->AllReduce(in1.data(), out1.data(), kCount, DataType::kFloat32, RedOp::kSum));
  E2E_EXPECT_OK(r0.get());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(8000));
  EXPECT_EQ(e2e::VerifyReduction(out0.data(), DataType::kFloat32, RedOp::kSum, 9402, 2, 0, kCount), "");
  EXPECT_EQ(e2e::VerifyReduction(out1.data(), DataType::kFloat32, RedOp::kSum, 9402, 2, 0, kCount), "");
  for (Communicator* c : {c0.get(), c1.get()}) {
    EXPECT_EQ(c->failover_stats().failovers, 1u);
    EXPECT_EQ(c->failover_stats().servers_left, 1u);
  }
}

}  // namespace
}  // namespace optcast::daemon
