// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A failover whose re-run dies too. Server A answers rank 0 only and dies; server B answers rank
// 1 only. The re-run of A's share goes round robin to the servers left, and B dies on receiving
// its part. The second failover moves B's share, and the part of A's that B was re-running, to the
// last server. Rank 0 had A's results already when the first re-run began: what it still waits for
// must be counted by what is due, not by what it holds, or it waits forever. Both scripted
// servers speak raw sockets so that they die at exactly those moments.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <map>
#include <thread>
#include <vector>

#include "harness.h"
#include "optcast/communicator.h"
#include "raw_client.h"
#include "scripted_server.h"

namespace optcast::e2e {
namespace {

constexpr int kRanks = 2;

// Sums its share of the job's first allreduce, answers rank 0 only, then closes its side.
bool AnswerRankZeroThenDie(ScriptedServer& server, std::string* why) {
  if (!server.AcceptAndWelcome(kRanks, why)) return false;
  std::map<uint64_t, ScriptedChunk> sums;
  if (!server.ReadAndSumShare(&sums, why) || !server.SendResults(0, sums, why)) return false;
  for (int fd : server.conns()) ::shutdown(fd, SHUT_WR);
  return true;
}

// Answers rank 1 only (rank 0's window to it stays full), and dies once rank 1 has sent it a
// chunk of a re-run.
bool AnswerRankOneThenDieOnTheRerun(ScriptedServer& server, std::string* why) {
  if (!server.AcceptAndWelcome(kRanks, why)) return false;
  std::map<uint64_t, ScriptedChunk> sums;
  if (!server.ReadAndSumShare(&sums, why) || !server.SendResults(1, sums, why)) return false;
  for (;;) {
    ScriptedChunk c;
    if (!server.ReadChunk(server.conns()[1], &c, why)) return false;
    if (wire::IsRecoverySeq(c.desc.coll_seq)) break;
  }
  server.CloseAll();
  return true;
}

TEST(E2eFailoverRerunTwice, ARerunWhoseServerDiesTooIsRerunAgainAndEveryRankGetsTheExactSum) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(1).ok());
  ScriptedServer a, b;
  ASSERT_TRUE(a.Listen());
  ASSERT_TRUE(b.Listen());
  a.Start(AnswerRankZeroThenDie);
  b.Start(AnswerRankOneThenDieOnTheRerun);
  // A first; the real server second, so that it is the first left and announces both failovers;
  // B last. A's share (two chunks) is re-run round robin on B and the real server.
  const std::vector<std::string> servers = {a.address(), farm.addresses()[0], b.address()};
  constexpr size_t kCount = 3 * 16384;
  std::vector<std::vector<float>> sums(kRanks, std::vector<float>(kCount));
  std::vector<FailoverStats> stats(kRanks);
  CommConfig c;
  c.timeout = milliseconds(15000);
  c.heartbeat = milliseconds(15000);  // the scripted servers send none: only their closing counts
  const std::vector<Status> st = RunRanksOnThreads(servers, kRanks, c, [&](int r, Communicator& comm) {
    std::vector<float> in(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((r + 1) * static_cast<int>(i % 1000));
    OPTCAST_RETURN_IF_ERROR(comm.AllReduce(in.data(), sums[r].data(), kCount, DataType::kFloat32, RedOp::kSum));
    // The job goes on over the one server left.
    std::vector<float> more(kCount, static_cast<float>(r + 1)), sum(kCount);
    OPTCAST_RETURN_IF_ERROR(comm.AllReduce(more.data(), sum.data(), kCount, DataType::kFloat32, RedOp::kSum));
    if (sum[0] != 3.0f || sum[kCount - 1] != 3.0f) return InternalError("the second sum is wrong");
    stats[r] = comm.failover_stats();
    return Status::Ok();
  });
  ASSERT_TRUE(a.Join()) << a.what();
  ASSERT_TRUE(b.Join()) << b.what();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(stats[r].failovers, 2u) << "rank " << r;
    EXPECT_EQ(stats[r].servers_left, 1u) << "rank " << r;
    size_t wrong = 0;
    for (size_t i = 0; i < kCount; ++i) wrong += sums[r][i] != static_cast<float>(3 * static_cast<int>(i % 1000));
    EXPECT_EQ(wrong, 0u) << "rank " << r << ": elements differ from the sum of the inputs";
  }
}

}  // namespace
}  // namespace optcast::e2e
