// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Graceful shutdown: a draining server takes no new connections or collectives, lets the ones in
// flight finish, fails what is left at the deadline with an error, and returns from Run().

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "checks.h"
#include "harness.h"
#include "raw_client.h"

namespace optcast::e2e {
namespace {

// One server on a thread, whose Run() result and return time the test can see.
class RunningServer {
 public:
  explicit RunningServer(server::ServerOptions o = TestServerOptions()) : server_(o) {}
  ~RunningServer() {
    server_.Stop();
    if (thread_.joinable()) thread_.join();
  }
  Status Start() {
    OPTCAST_RETURN_IF_ERROR(server_.Start());
    thread_ = std::thread([this] {
      result_ = server_.Run();
      returned_.store(true);
    });
    return Status::Ok();
  }
  server::Server& server() { return server_; }
  std::vector<std::string> addresses() const { return {"127.0.0.1:" + std::to_string(server_.port())}; }
  // Waits for Run() to return; its status, or a timeout error.
  Status Returned(milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (!returned_.load()) {
      if (Clock::now() >= deadline) return TimeoutError("Run() did not return");
      std::this_thread::sleep_for(milliseconds(2));
    }
    thread_.join();
    return result_;
  }
  bool returned() const { return returned_.load(); }

 private:
  server::Server server_;
  std::thread thread_;
  std::atomic<bool> returned_{false};
  Status result_;
};

CommConfig Config() {
  CommConfig c;
  c.timeout = milliseconds(8000);
  c.connect_timeout = milliseconds(2000);
  return c;
}

TEST(E2eShutdown, TheCollectiveInFlightFinishesThenNewOnesAreRefused) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  RunningServer srv;
  E2E_ASSERT_OK(srv.Start());
  const JobId job = JobId::Random();
  constexpr size_t kCount = 1 << 20;
  constexpr uint64_t kSeed = 9100;
  std::unique_ptr<Communicator> c0, c1;
  E2E_ASSERT_OK(MakeComm(srv.addresses(), job, 2, 0, Config(), &c0));
  E2E_ASSERT_OK(MakeComm(srv.addresses(), job, 2, 1, Config(), &c1));
  std::vector<float> in0(kCount), in1(kCount), out0(kCount), out1(kCount);
  FillInput(DataType::kFloat32, RedOp::kSum, kSeed, 0, 0, kCount, in0.data());
  FillInput(DataType::kFloat32, RedOp::kSum, kSeed, 1, 0, kCount, in1.data());

  // Rank 0's half of the collective reaches the server; only then does the shutdown begin, and
  // only then does rank 1 join in.
  auto rank0 = std::async(std::launch::async, [&] {
    return c0->AllReduce(in0.data(), out0.data(), kCount, DataType::kFloat32, RedOp::kSum);
  });
  ASSERT_TRUE(WaitFor([&] { return srv.server().stats().bytes_in > 0; }));
  srv.server().Drain(milliseconds(20000));
  ASSERT_TRUE(WaitFor([&] { return srv.server().stats().draining; }));
  EXPECT_EQ(RawConnect(srv.server().port()), -1) << "a draining server still accepts connections";
  E2E_EXPECT_OK(c1->AllReduce(in1.data(), out1.data(), kCount, DataType::kFloat32, RedOp::kSum));
  E2E_EXPECT_OK(rank0.get());
  EXPECT_EQ(VerifyReduction(out0.data(), DataType::kFloat32, RedOp::kSum, kSeed, 2, 0, kCount), "");
  EXPECT_EQ(VerifyReduction(out1.data(), DataType::kFloat32, RedOp::kSum, kSeed, 2, 0, kCount), "");

  // Nothing is in flight any more: the server says goodbye and returns; the next collective fails
  // with the reason instead of hanging.
  E2E_EXPECT_OK(srv.Returned(milliseconds(5000)));
  Status next = c0->AllReduce(in0.data(), out0.data(), 16, DataType::kFloat32, RedOp::kSum);
  EXPECT_FALSE(next.ok());
  EXPECT_NE(next.message().find("shutting down"), std::string::npos) << next.ToString();
}

TEST(E2eShutdown, WhatIsStillRunningAtTheDeadlineFailsWithTheReason) {
  RunningServer srv;
  E2E_ASSERT_OK(srv.Start());
  const JobId job = JobId::Random();
  std::unique_ptr<Communicator> c0, c1;
  E2E_ASSERT_OK(MakeComm(srv.addresses(), job, 2, 0, Config(), &c0));
  E2E_ASSERT_OK(MakeComm(srv.addresses(), job, 2, 1, Config(), &c1));
  std::vector<float> data(4096, 1.0f);
  // Rank 1 never joins this collective, so it cannot finish.
  auto rank0 = std::async(std::launch::async, [&] {
    return c0->AllReduce(data.data(), data.data(), data.size(), DataType::kFloat32, RedOp::kSum);
  });
  ASSERT_TRUE(WaitFor([&] { return srv.server().stats().bytes_in > 0; }));
  const auto t0 = Clock::now();
  srv.server().Drain(milliseconds(300));
  Status st = rank0.get();
  const auto took = Clock::now() - t0;
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("did not finish within the shutdown deadline"), std::string::npos) << st.ToString();
  EXPECT_LT(took, milliseconds(4000)) << "the deadline was 300 ms";
  E2E_EXPECT_OK(srv.Returned(milliseconds(5000)));
}

TEST(E2eShutdown, AnIdleServerReturnsAtOnceAndAHelloIsRefused) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  RunningServer srv;
  E2E_ASSERT_OK(srv.Start());
  // Connected but silent when the drain begins: told why, then closed.
  const int fd = RawConnect(srv.server().port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(WaitFor([&] { return srv.server().stats().connections == 1; }));
  srv.server().Drain(milliseconds(10000));
  ExpectErrorThenClose(fd, Code::kUnavailable, {"shutting down"}, "idle connection at shutdown");
  ::close(fd);
  E2E_EXPECT_OK(srv.Returned(milliseconds(3000)));
}

}  // namespace
}  // namespace optcast::e2e
