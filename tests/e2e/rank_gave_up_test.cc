// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// With failover off, a rank that loses a server gives up, and the other ranks must learn the
// cause, not only that it left: a rank may hear from a live server of the first one's departure
// before it sees the dead server itself, or (here) never see it. The "dead" server is scripted on
// a raw socket: it closes rank 0's connection only and keeps rank 1's open, silent.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include "harness.h"
#include "optcast/communicator.h"
#include "raw_client.h"
#include "scripted_server.h"

namespace optcast::e2e {
namespace {

TEST(E2eRankGaveUp, ARankThatLostAServerTellsTheOthersWhichThroughTheServersLeft) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  constexpr int kRanks = 2;
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(1).ok());
  ScriptedServer dying;
  ASSERT_TRUE(dying.Listen());
  dying.Start([](ScriptedServer& s, std::string* why) {
    if (!s.AcceptAndWelcome(kRanks, why)) return false;
    ScriptedChunk first;
    if (!s.ReadChunk(s.conns()[0], &first, why)) return false;  // rank 0 is in its collective
    ::shutdown(s.conns()[0], SHUT_RDWR);
    if (!s.WaitForClose(s.conns()[1], 20000)) {
      *why = "rank 1 did not give up within 20 s";
      return false;
    }
    s.CloseAll();
    return true;
  });
  const std::vector<std::string> servers = {dying.address(), farm.addresses()[0]};
  constexpr size_t kCount = 3 * 16384;  // striped over both servers
  CommConfig c;
  c.failover = false;
  c.timeout = milliseconds(20000);
  c.heartbeat = milliseconds(20000);  // the scripted server sends none
  std::vector<milliseconds> took(kRanks);
  const std::vector<Status> st = RunRanksOnThreads(servers, kRanks, c, [&](int r, Communicator& comm) {
    std::vector<float> in(kCount, 1.0f), out(kCount);
    const auto start = std::chrono::steady_clock::now();
    Status done = comm.AllReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum);
    took[r] = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    return done;
  });
  ASSERT_TRUE(dying.Join()) << dying.what();
  EXPECT_EQ(st[0].code(), Code::kUnavailable) << st[0].ToString();
  EXPECT_NE(st[0].message().find(dying.address()), std::string::npos) << st[0].ToString();
  // Rank 1 never saw the scripted server close; the server left tells it who gave up and why.
  EXPECT_EQ(st[1].code(), Code::kPeerFailed) << st[1].ToString();
  EXPECT_NE(st[1].message().find("rank 0"), std::string::npos) << st[1].ToString();
  EXPECT_NE(st[1].message().find("gave up"), std::string::npos) << st[1].ToString();
  EXPECT_NE(st[1].message().find("lost the connection to server " + dying.address()), std::string::npos)
      << st[1].ToString();
  EXPECT_LT(took[1].count(), 8000) << "rank 1 waited for its timeout: " << st[1].ToString();
}

// The same, with the collective in flight needing only the server rank 1 never sees close: the
// server left has nothing of it to fail, and rank 1 must still learn rank 0's reason soon, not
// wait for its own timeout and blame the silent server.
TEST(E2eRankGaveUp, ACollectiveOnlyOnTheLostServerFailsWithTheReasonNotATimeout) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  constexpr int kRanks = 2;
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(1).ok());
  ScriptedServer dying;
  ASSERT_TRUE(dying.Listen());
  dying.Start([](ScriptedServer& s, std::string* why) {
    if (!s.AcceptAndWelcome(kRanks, why)) return false;
    ScriptedChunk chunk;
    if (!s.ReadChunk(s.conns()[0], &chunk, why)) return false;  // rank 0 in collective #2
    if (chunk.desc.coll_seq != 2) {
      *why = "expected collective #2 first, got #" + std::to_string(chunk.desc.coll_seq);
      return false;
    }
    ::shutdown(s.conns()[0], SHUT_RDWR);
    if (!s.WaitForClose(s.conns()[1], 20000)) {
      *why = "rank 1 did not give up within 20 s";
      return false;
    }
    s.CloseAll();
    return true;
  });
  const std::vector<std::string> servers = {dying.address(), farm.addresses()[0]};
  constexpr size_t kCount = 1000;  // one server per collective: #1 on the second, #2 on the first
  CommConfig c;
  c.failover = false;
  c.timeout = milliseconds(20000);
  c.heartbeat = milliseconds(20000);  // the scripted server sends none
  std::vector<milliseconds> took(kRanks);
  const std::vector<Status> st = RunRanksOnThreads(servers, kRanks, c, [&](int r, Communicator& comm) {
    std::vector<float> in(kCount, 1.0f), out(kCount);
    Status first = comm.AllReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum);
    if (!first.ok()) return first;
    if (out[0] != 2.0f) return InternalError("collective #1 gave " + std::to_string(out[0]));
    const auto start = std::chrono::steady_clock::now();
    Status second = comm.AllReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum);
    took[r] = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    return second;
  });
  ASSERT_TRUE(dying.Join()) << dying.what();
  EXPECT_EQ(st[0].code(), Code::kUnavailable) << st[0].ToString();
  EXPECT_NE(st[0].message().find(dying.address()), std::string::npos) << st[0].ToString();
  EXPECT_EQ(st[1].code(), Code::kPeerFailed) << st[1].ToString();
  EXPECT_NE(st[1].message().find("rank 0"), std::string::npos) << st[1].ToString();
  EXPECT_NE(st[1].message().find("gave up"), std::string::npos) << st[1].ToString();
  EXPECT_NE(st[1].message().find("lost the connection to server " + dying.address()), std::string::npos)
      << st[1].ToString();
  EXPECT_LT(took[1].count(), 10000) << "rank 1 waited for its timeout: " << st[1].ToString();
}

}  // namespace
}  // namespace optcast::e2e
