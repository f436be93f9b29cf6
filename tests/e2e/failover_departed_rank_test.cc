// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A rank that completed the job's last collective and left it cannot take part in a failover. When
// a server then dies holding another rank's result, nothing can re-run it without the input of the
// rank that left: the rank still waiting fails at once, naming the rank that left, instead of
// waiting out its timeout for a report that cannot come. The dying server is scripted on a raw
// socket: it answers rank 0 in full and rank 1 never, and dies once rank 0 has gone.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "harness.h"
#include "optcast/communicator.h"
#include "raw_client.h"
#include "scripted_server.h"

namespace optcast::e2e {
namespace {

// Sums its share of one float32 allreduce from every rank, answers rank 0 only, and closes every
// connection once rank 0 has closed its own.
bool AnswerRankZeroOnlyThenDieWhenItLeaves(ScriptedServer& server, int nranks, std::string* why) {
  if (!server.AcceptAndWelcome(nranks, why)) return false;
  std::map<uint64_t, ScriptedChunk> sums;
  if (!server.ReadAndSumShare(&sums, why) || !server.SendResults(0, sums, why)) return false;
  if (!server.WaitForClose(server.conns()[0], 10000)) {
    *why = "rank 0 did not leave within 10 s";
    return false;
  }
  server.CloseAll();
  return true;
}

TEST(E2eFailoverDepartedRank, AServerDyingAfterARankLeftFailsTheRanksStillWaitingAtOnceNamingIt) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  constexpr int kRanks = 2;
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(2).ok());
  ScriptedServer dying;
  ASSERT_TRUE(dying.Listen());
  dying.Start(
      [](ScriptedServer& s, std::string* why) { return AnswerRankZeroOnlyThenDieWhenItLeaves(s, kRanks, why); });
  std::vector<std::string> servers = {dying.address()};
  for (const std::string& a : farm.addresses()) servers.push_back(a);
  constexpr size_t kCount = 3 * 16384;
  std::vector<std::vector<float>> sums(kRanks, std::vector<float>(kCount));
  std::chrono::milliseconds rank1_took{0};
  CommConfig c;
  c.timeout = milliseconds(20000);
  c.heartbeat = milliseconds(20000);  // the scripted server sends none: only its closing counts
  const std::vector<Status> st = RunRanksOnThreads(servers, kRanks, c, [&](int r, Communicator& comm) {
    std::vector<float> in(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((r + 1) * static_cast<int>(i % 1000));
    const auto start = std::chrono::steady_clock::now();
    Status done = comm.AllReduce(in.data(), sums[r].data(), kCount, DataType::kFloat32, RedOp::kSum);
    if (r == 1) rank1_took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    // Rank 0 leaves the job here, its last collective done.
    return done;
  });
  ASSERT_TRUE(dying.Join()) << dying.what();
  ASSERT_TRUE(st[0].ok()) << st[0].ToString();
  size_t wrong = 0;
  for (size_t i = 0; i < kCount; ++i) wrong += sums[0][i] != static_cast<float>(3 * static_cast<int>(i % 1000));
  EXPECT_EQ(wrong, 0u) << "rank 0's result differs from the sum of the inputs";
  ASSERT_FALSE(st[1].ok()) << "rank 1 cannot have its result: the rank that left took its input along";
  EXPECT_NE(st[1].message().find("rank(s) 0"), std::string::npos) << st[1].ToString();
  EXPECT_NE(st[1].message().find("had left the job"), std::string::npos) << st[1].ToString();
  EXPECT_NE(st[1].message().find("cannot be re-run exactly"), std::string::npos) << st[1].ToString();
  EXPECT_LT(rank1_took.count(), 8000) << "rank 1 waited for a report that cannot come: " << st[1].ToString();
}

}  // namespace
}  // namespace optcast::e2e
