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

constexpr int kRanks = 2;

// Failover off; the scripted server sends no heartbeats.
CommConfig GaveUpConfig() {
  CommConfig c;
  c.failover = false;
  c.timeout = milliseconds(20000);
  c.heartbeat = milliseconds(20000);
  return c;
}

// Rank 0 lost the scripted server; rank 1, which never saw it close, learns from the server left
// who gave up and why, within `limit_ms` of starting the collective it was in.
void ExpectRank1LearnsWhyRank0GaveUp(const std::vector<Status>& st, const std::vector<milliseconds>& took,
                                     const std::string& lost, int64_t limit_ms) {
  EXPECT_EQ(st[0].code(), Code::kUnavailable) << st[0].ToString();
  EXPECT_NE(st[0].message().find(lost), std::string::npos) << st[0].ToString();
  EXPECT_EQ(st[1].code(), Code::kPeerFailed) << st[1].ToString();
  EXPECT_NE(st[1].message().find("rank 0"), std::string::npos) << st[1].ToString();
  EXPECT_NE(st[1].message().find("gave up"), std::string::npos) << st[1].ToString();
  EXPECT_NE(st[1].message().find("lost the connection to server " + lost), std::string::npos) << st[1].ToString();
  EXPECT_LT(took[1].count(), limit_ms) << "rank 1 waited for its timeout: " << st[1].ToString();
}

// The "dead" server: welcomes both ranks, reads rank 0's first chunk (which must be of collective
// `expect_seq` unless that is 0), closes rank 0's connection only and waits for rank 1 to leave.
void StartDyingServer(ScriptedServer& dying, uint64_t expect_seq) {
  dying.Start([expect_seq](ScriptedServer& s, std::string* why) {
    if (!s.AcceptAndWelcome(kRanks, why)) return false;
    ScriptedChunk first;
    if (!s.ReadChunk(s.conns()[0], &first, why)) return false;  // rank 0 is in its collective
    if (expect_seq != 0 && first.desc.coll_seq != expect_seq) {
      *why = "expected a chunk of collective #" + std::to_string(expect_seq) + " first, got #" +
             std::to_string(first.desc.coll_seq);
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
}

TEST(E2eRankGaveUp, ARankThatLostAServerTellsTheOthersWhichThroughTheServersLeft) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(1).ok());
  ScriptedServer dying;
  ASSERT_TRUE(dying.Listen());
  StartDyingServer(dying, 0);
  const std::vector<std::string> servers = {dying.address(), farm.addresses()[0]};
  constexpr size_t kCount = 3 * 16384;  // striped over both servers
  const CommConfig c = GaveUpConfig();
  std::vector<milliseconds> took(kRanks);
  const std::vector<Status> st = RunRanksOnThreads(servers, kRanks, c, [&](int r, Communicator& comm) {
    std::vector<float> in(kCount, 1.0f), out(kCount);
    const auto start = std::chrono::steady_clock::now();
    Status done = comm.AllReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum);
    took[r] = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    return done;
  });
  ASSERT_TRUE(dying.Join()) << dying.what();
  ExpectRank1LearnsWhyRank0GaveUp(st, took, dying.address(), 8000);
}

// The same, with the collective in flight needing only the server rank 1 never sees close: the
// server left has nothing of it to fail, and rank 1 must still learn rank 0's reason soon, not
// wait for its own timeout and blame the silent server.
TEST(E2eRankGaveUp, ACollectiveOnlyOnTheLostServerFailsWithTheReasonNotATimeout) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(1).ok());
  ScriptedServer dying;
  ASSERT_TRUE(dying.Listen());
  StartDyingServer(dying, 2);
  const std::vector<std::string> servers = {dying.address(), farm.addresses()[0]};
  constexpr size_t kCount = 1000;  // one server per collective: #1 on the second, #2 on the first
  const CommConfig c = GaveUpConfig();
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
  ExpectRank1LearnsWhyRank0GaveUp(st, took, dying.address(), 10000);
}

}  // namespace
}  // namespace optcast::e2e
