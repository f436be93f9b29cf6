// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Joining a server: what the server sends right behind its welcome is not lost. One read of a
// connection may hand over several messages, and a job that fails just as a rank joins sends that
// rank its Error right behind the welcome: the rank must report that error, not wait for answers
// that will never come or blame a closed connection.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "harness.h"
#include "optcast/communicator.h"
#include "raw_client.h"
#include "scripted_server.h"

namespace optcast::e2e {
namespace {

constexpr const char* kReason = "job 42 failed: a rank sent a reducescatter to an aggregation tree";

TEST(E2eJoin, AnErrorRightBehindTheWelcomeIsWhatTheRankReports) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ScriptedServer server;
  ASSERT_TRUE(server.Listen());
  server.Start([](ScriptedServer& s, std::string* why) {
    const wire::ErrorMsg error{Code::kInvalidArgument, 0, kReason};
    if (!s.AcceptAndWelcome(1, why, Frame(wire::EncodeError(error), 0))) return false;
    // As a server does after an Error: nothing more, and the connection closes once the rank goes.
    if (!s.WaitForClose(s.conns()[0], 10000)) {
      *why = "the rank kept the connection open after the error";
      return false;
    }
    return true;
  });
  CommConfig c;
  c.timeout = std::chrono::milliseconds(5000);
  const std::vector<Status> st = RunRanksOnThreads({server.address()}, 1, c, [](int, Communicator& comm) {
    std::vector<float> in(1024, 1.0f), out(1024);
    return comm.AllReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
  });
  ASSERT_TRUE(server.Join()) << server.what();
  ASSERT_FALSE(st[0].ok());
  EXPECT_EQ(st[0].code(), Code::kInvalidArgument) << st[0].ToString();
  EXPECT_NE(st[0].message().find(kReason), std::string::npos) << st[0].ToString();
}

}  // namespace
}  // namespace optcast::e2e
