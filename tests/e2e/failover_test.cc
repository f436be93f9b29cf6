// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Failover: servers in processes of their own die (SIGKILL) or freeze (SIGSTOP) while ranks in
// other processes run allreduces, reduce-scatters and all-gathers; every result is checked against
// the reference.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace optcast::e2e {
namespace {

// Server i's port is in value[i][0]; ranks use slots after the servers'.
struct Cluster {
  Shared sh;
  Children kids;
  std::vector<int> server_child;
  std::vector<std::string> addresses;
};

// `lanes`: each server's event loops (--io-threads); a dead server takes all its lanes.
void StartServers(Cluster* c, int n, int lanes = 1) {
  for (int i = 0; i < n; ++i) {
    c->server_child.push_back(c->kids.Spawn([c, i, lanes]() -> int {
      server::Server s(WithLanes(lanes));
      Status st = s.Start();
      if (!st.ok()) return c->sh.Fail(i, "server start: " + st.ToString());
      c->sh->value[i][0] = s.port();
      st = s.Run();
      return st.ok() ? 0 : c->sh.Fail(i, "server run: " + st.ToString());
    }));
  }
  c->kids.Start();  // no server threads in this process: later forks are safe at any time
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < n; ++i) {
    while (c->sh->value[i][0] == 0 && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(2));
    c->addresses.push_back("127.0.0.1:" + std::to_string(c->sh->value[i][0]));
  }
}

CommConfig FailoverConfig() {
  CommConfig c;
  c.timeout = milliseconds(20000);
  c.connect_timeout = milliseconds(10000);
  return c;
}

// Sizes that stripe over every server in many chunks, over one, and in between.
constexpr size_t kCounts[] = {300000, 1000, 65536, 1200000, 7};

// A rank: each round two allreduces in flight, one out of place and one in place, both checked
// bit for bit against the reference. value[slot][1]: rounds done; [2]: failovers seen. Runs
// until round `stop` (once the parent sets it; then exits 0), or fails; an error's text goes to
// msg[slot]. Every rank of a job stops at the same round, so none leaves a peer mid-collective.
int FailoverRank(Shared& sh, const std::vector<std::string>& servers, const JobId& job, int nranks, int rank, int slot,
                 const CommConfig& config, uint64_t seed0) {
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(servers, job, nranks, rank, config, &comm);
  if (!st.ok()) return sh.Fail(slot, "create: " + st.ToString());
  const size_t max_count = 1200000;
  std::vector<float> in(max_count), out(max_count), inplace(max_count);
  for (int round = 0;; ++round) {
    if (sh->stop.load() != 0 && round >= sh->stop.load()) {
      sh->value[slot][2] = comm->failover_stats().failovers;
      return 0;
    }
    const size_t ca = kCounts[round % 5];
    const size_t cb = kCounts[(round + 2) % 5];
    const uint64_t sa = seed0 + 2 * static_cast<uint64_t>(round);
    const uint64_t sb = sa + 1;
    FillInput(DataType::kFloat32, RedOp::kSum, sa, rank, 0, ca, in.data());
    FillInput(DataType::kFloat32, RedOp::kSum, sb, rank, 0, cb, inplace.data());
    Request* a = nullptr;
    Request* b = nullptr;
    st = comm->IAllReduce(in.data(), out.data(), ca, DataType::kFloat32, RedOp::kSum, &a);
    if (st.ok()) st = comm->IAllReduce(inplace.data(), inplace.data(), cb, DataType::kFloat32, RedOp::kSum, &b);
    Status sta = a != nullptr ? comm->Wait(a) : st;
    Status stb = b != nullptr ? comm->Wait(b) : st;
    if (!sta.ok() || !stb.ok()) {
      sh->t_ns[slot][0] = NowNs();
      sh->value[slot][2] = comm->failover_stats().failovers;
      sh.Note(slot, !sta.ok() ? sta.ToString() : stb.ToString());
      return 2;
    }
    std::string err = VerifyReduction(out.data(), DataType::kFloat32, RedOp::kSum, sa, nranks, 0, ca);
    if (err.empty()) err = VerifyReduction(inplace.data(), DataType::kFloat32, RedOp::kSum, sb, nranks, 0, cb);
    if (!err.empty()) return sh.Fail(slot, "round " + std::to_string(round) + ": " + err);
    sh->value[slot][1] = round + 1;
    sh->value[slot][2] = comm->failover_stats().failovers;
    if (comm->failover_stats().failovers > 0 && sh->t_ns[slot][1] == 0) sh->t_ns[slot][1] = NowNs();
  }
}

// Per-rank counts (a reduce-scatter's and an all-gather's per rank) for the mixed rounds: striped
// over every server in many chunks, over one, and in between.
constexpr size_t kMixCounts[] = {70000, 1000, 16384, 250000, 7};

// A rank of the mixed rounds: each round an allreduce, a reduce-scatter and an all-gather in
// flight at once, the latter two in place every other round, each checked bit for bit against
// the reference. Slots and stopping as FailoverRank.
int MixedRank(Shared& sh, const std::vector<std::string>& servers, const JobId& job, int nranks, int rank, int slot,
              const CommConfig& config, uint64_t seed0) {
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(servers, job, nranks, rank, config, &comm);
  if (!st.ok()) return sh.Fail(slot, "create: " + st.ToString());
  const size_t max_count = 250000;
  const size_t n = static_cast<size_t>(nranks);
  std::vector<float> ar_in(max_count), ar_out(max_count), rs_in(max_count * n), rs_out(max_count);
  std::vector<float> ag_in(max_count), ag_out(max_count * n);
  for (int round = 0;; ++round) {
    if (sh->stop.load() != 0 && round >= sh->stop.load()) {
      sh->value[slot][2] = comm->failover_stats().failovers;
      return 0;
    }
    const bool in_place = round % 2 == 0;
    const size_t ca = kMixCounts[round % 5];
    const size_t cr = kMixCounts[(round + 1) % 5];
    const size_t cg = kMixCounts[(round + 3) % 5];
    const uint64_t sa = seed0 + 3 * static_cast<uint64_t>(round);
    const uint64_t sr = sa + 1;
    const uint64_t sg = sa + 2;
    FillInput(DataType::kFloat32, RedOp::kSum, sa, rank, 0, ca, ar_in.data());
    FillInput(DataType::kFloat32, RedOp::kSum, sr, rank, 0, cr * n, rs_in.data());
    float* rs_dst = in_place ? rs_in.data() + static_cast<size_t>(rank) * cr : rs_out.data();
    float* ag_src = in_place ? ag_out.data() + static_cast<size_t>(rank) * cg : ag_in.data();
    FillInput(DataType::kFloat32, RedOp::kSum, sg, rank, 0, cg, ag_src);
    Request* a = nullptr;
    Request* r = nullptr;
    Request* g = nullptr;
    st = comm->IAllReduce(ar_in.data(), ar_out.data(), ca, DataType::kFloat32, RedOp::kSum, &a);
    if (st.ok()) st = comm->IReduceScatter(rs_in.data(), rs_dst, cr, DataType::kFloat32, RedOp::kSum, &r);
    if (st.ok()) st = comm->IAllGather(ag_src, ag_out.data(), cg, DataType::kFloat32, &g);
    Status done[3];
    Request* reqs[3] = {a, r, g};
    for (int i = 0; i < 3; ++i) done[i] = reqs[i] != nullptr ? comm->Wait(reqs[i]) : st;
    for (const Status& d : done) {
      if (d.ok()) continue;
      sh->t_ns[slot][0] = NowNs();
      sh->value[slot][2] = comm->failover_stats().failovers;
      sh.Note(slot, d.ToString());
      return 2;
    }
    std::string err = VerifyReduction(ar_out.data(), DataType::kFloat32, RedOp::kSum, sa, nranks, 0, ca);
    if (err.empty()) {
      err = VerifyReduction(rs_dst, DataType::kFloat32, RedOp::kSum, sr, nranks, static_cast<uint64_t>(rank) * cr, cr);
      if (!err.empty()) err = "reduce-scatter: " + err;
    }
    if (err.empty()) {
      err = VerifyAllGather(ag_out.data(), DataType::kFloat32, sg, nranks, cg);
      if (!err.empty()) err = "all-gather: " + err;
    }
    if (!err.empty()) return sh.Fail(slot, "round " + std::to_string(round) + ": " + err);
    sh->value[slot][1] = round + 1;
    sh->value[slot][2] = comm->failover_stats().failovers;
    if (comm->failover_stats().failovers > 0 && sh->t_ns[slot][1] == 0) sh->t_ns[slot][1] = NowNs();
  }
}

// Waits until every rank slot in [first, first + n) has done `rounds` more rounds than `from`.
bool WaitRounds(Shared& sh, int first, int n, const std::vector<int64_t>& from, int64_t rounds,
                milliseconds limit = milliseconds(30000)) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    bool all = true;
    for (int i = 0; i < n; ++i) all = all && sh->value[first + i][1] >= from[i] + rounds;
    if (all) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

std::vector<int64_t> Rounds(Shared& sh, int first, int n) {
  std::vector<int64_t> r;
  for (int i = 0; i < n; ++i) r.push_back(sh->value[first + i][1]);
  return r;
}

std::string Messages(Shared& sh, int first, int n) {
  std::string all;
  for (int i = 0; i < n; ++i) all += " | slot " + std::to_string(first + i) + ": " + sh.Message(first + i);
  return all;
}

// The ranks' messages, then each server's state: a server that died unasked is the first thing to
// know when ranks stall.
std::string Report(Cluster& c, int first, int n) {
  std::string all = Messages(c.sh, first, n);
  for (size_t s = 0; s < c.server_child.size(); ++s) {
    all += " | server " + std::to_string(s) + " (" + c.addresses[s] + "): " + c.kids.Peek(c.server_child[s]).Describe();
    const std::string note = c.sh.Message(static_cast<int>(s));
    if (!note.empty()) all += ": " + note;
  }
  return all;
}

using RankMain = int (*)(Shared&, const std::vector<std::string>&, const JobId&, int, int, int, const CommConfig&,
                         uint64_t);

void SpawnRanks(Cluster& c, const JobId& job, int nranks, int first_slot, const CommConfig& config, uint64_t seed,
                RankMain rank_main = FailoverRank) {
  for (int r = 0; r < nranks; ++r) {
    const int slot = first_slot + r;
    c.kids.Spawn([&c, job, nranks, r, slot, config, seed, rank_main]() -> int {
      return rank_main(c.sh, c.addresses, job, nranks, r, slot, config, seed);
    });
  }
  c.kids.Start();
}

// Stops the ranks and expects each to have ended cleanly after `failovers` failovers.
void StopAndCheck(Cluster& c, int first_slot, int nranks, uint32_t failovers) {
  int64_t last = 0;
  for (int r = 0; r < nranks; ++r) last = std::max(last, c.sh->value[first_slot + r][1]);
  c.sh->stop = static_cast<int>(last + 2);
  for (int r = 0; r < nranks; ++r) {
    const int slot = first_slot + r;
    const ChildResult res = c.kids.Wait(slot, milliseconds(30000));  // children: servers, then ranks by slot
    EXPECT_TRUE(res.exited && res.exit_code == 0)
        << "rank " << r << ": " << res.Describe() << ": " << c.sh.Message(slot);
    EXPECT_EQ(c.sh->value[slot][2], failovers) << "rank " << r;
  }
}

TEST(E2eFailover, KillingOneThenASecondOfThreeServersLosesNoCollective) {
  Cluster c;
  StartServers(&c, 3);
  constexpr int kRanks = 4;
  const int first = 3;
  SpawnRanks(c, JobId::Random(), kRanks, first, FailoverConfig(), 1000);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, std::vector<int64_t>(kRanks, 0), 3)) << Report(c, first, kRanks);
  // The middle server first, then the first one, which coordinated the first failover.
  const int64_t t_kill = NowNs();
  c.kids.Kill(c.server_child[1], SIGKILL);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, Rounds(c.sh, first, kRanks), 4)) << Report(c, first, kRanks);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(c.sh->value[first + r][2], 1) << "rank " << r;
  const double recover_ms = static_cast<double>(c.sh->t_ns[first][1] - t_kill) / 1e6;
  ::testing::Test::RecordProperty("first_failover_ms", std::to_string(static_cast<int>(recover_ms)));
  c.kids.Kill(c.server_child[0], SIGKILL);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, Rounds(c.sh, first, kRanks), 4)) << Report(c, first, kRanks);
  StopAndCheck(c, first, kRanks, 2);
}

// Reduce-scatters and all-gathers in flight when a server dies are re-run on the servers left,
// beside allreduces, in place and out of place.
TEST(E2eFailover, KillingOneThenASecondOfThreeServersUnderMixedCollectivesLosesNone) {
  Cluster c;
  StartServers(&c, 3);
  constexpr int kRanks = 4;
  const int first = 3;
  SpawnRanks(c, JobId::Random(), kRanks, first, FailoverConfig(), 7000, MixedRank);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, std::vector<int64_t>(kRanks, 0), 3)) << Report(c, first, kRanks);
  c.kids.Kill(c.server_child[2], SIGKILL);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, Rounds(c.sh, first, kRanks), 4)) << Report(c, first, kRanks);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(c.sh->value[first + r][2], 1) << "rank " << r;
  c.kids.Kill(c.server_child[0], SIGKILL);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, Rounds(c.sh, first, kRanks), 4)) << Report(c, first, kRanks);
  StopAndCheck(c, first, kRanks, 2);
}

// A server of two lanes is two links of every rank: killed, it takes both in one failover, and
// the agreement over the links left (places in the list of (server, lane) pairs) still holds.
TEST(E2eFailover, KillingAServerOfTwoLanesThenAnotherLosesNoCollective) {
  Cluster c;
  StartServers(&c, 3, 2);
  constexpr int kRanks = 4;
  const int first = 3;
  SpawnRanks(c, JobId::Random(), kRanks, first, FailoverConfig(), 9000, MixedRank);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, std::vector<int64_t>(kRanks, 0), 3)) << Report(c, first, kRanks);
  c.kids.Kill(c.server_child[1], SIGKILL);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, Rounds(c.sh, first, kRanks), 4)) << Report(c, first, kRanks);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(c.sh->value[first + r][2], 1) << "rank " << r;
  c.kids.Kill(c.server_child[0], SIGKILL);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, Rounds(c.sh, first, kRanks), 4)) << Report(c, first, kRanks);
  StopAndCheck(c, first, kRanks, 2);
}

TEST(E2eFailover, LastServerDyingFailsEveryRankClearly) {
  Cluster c;
  StartServers(&c, 2);
  constexpr int kRanks = 3;
  const int first = 2;
  SpawnRanks(c, JobId::Random(), kRanks, first, FailoverConfig(), 2000);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, std::vector<int64_t>(kRanks, 0), 2)) << Report(c, first, kRanks);
  c.kids.Kill(c.server_child[0], SIGKILL);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, Rounds(c.sh, first, kRanks), 3)) << Report(c, first, kRanks);
  const int64_t t_kill = NowNs();
  c.kids.Kill(c.server_child[1], SIGKILL);
  for (int r = 0; r < kRanks; ++r) {
    const int slot = first + r;
    const ChildResult res = c.kids.Wait(2 + r, milliseconds(30000));
    EXPECT_TRUE(res.exited && res.exit_code == 2)
        << "rank " << r << ": " << res.Describe() << ": " << c.sh.Message(slot);
    EXPECT_NE(c.sh.Message(slot).find("no server of the job is left"), std::string::npos) << c.sh.Message(slot);
    EXPECT_NE(c.sh.Message(slot).find(c.addresses[1]), std::string::npos) << c.sh.Message(slot);
    const double latency_s = static_cast<double>(c.sh->t_ns[slot][0] - t_kill) / 1e9;
    EXPECT_LT(latency_s, 6.0) << "rank " << r << " learned of the last death only after " << latency_s << " s";
  }
}

TEST(E2eFailover, FrozenServerIsDroppedWithinTheHeartbeatBound) {
  // Runs over ofi too: no server dies mid-collective here (the frozen one is killed once the
  // ranks are done), which is what keeps the others opt-in there.
  Cluster c;
  StartServers(&c, 3);
  constexpr int kRanks = 3;
  const int first = 3;
  CommConfig config = FailoverConfig();
  config.heartbeat = milliseconds(1500);
  SpawnRanks(c, JobId::Random(), kRanks, first, config, 3000);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, std::vector<int64_t>(kRanks, 0), 3)) << Report(c, first, kRanks);
  const int64_t t_stop = NowNs();
  c.kids.Kill(c.server_child[2], SIGSTOP);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, Rounds(c.sh, first, kRanks), 3)) << Report(c, first, kRanks);
  for (int r = 0; r < kRanks; ++r) {
    const double detect_ms = static_cast<double>(c.sh->t_ns[first + r][1] - t_stop) / 1e6;
    // The bound, plus the round that was waiting and the agreement, on a busy machine.
    EXPECT_LT(detect_ms, 1500 + 4000) << "rank " << r;
    ::testing::Test::RecordProperty("rank" + std::to_string(r) + "_back_ms",
                                    std::to_string(static_cast<int>(detect_ms)));
  }
  StopAndCheck(c, first, kRanks, 1);
  c.kids.Kill(c.server_child[2], SIGKILL);
}

TEST(E2eFailover, TwoJobsSharingTheServersBothSurvive) {
  Cluster c;
  StartServers(&c, 3);
  const int first = 3;
  SpawnRanks(c, JobId::Random(), 2, first, FailoverConfig(), 4000);
  SpawnRanks(c, JobId::Random(), 3, first + 2, FailoverConfig(), 5000);
  ASSERT_TRUE(WaitRounds(c.sh, first, 5, std::vector<int64_t>(5, 0), 3)) << Report(c, first, 5);
  c.kids.Kill(c.server_child[0], SIGKILL);
  ASSERT_TRUE(WaitRounds(c.sh, first, 5, Rounds(c.sh, first, 5), 4)) << Report(c, first, 5);
  StopAndCheck(c, first, 5, 1);
}

TEST(E2eFailover, FailoverOffFailsLikeBefore) {
  Cluster c;
  StartServers(&c, 3);
  constexpr int kRanks = 2;
  const int first = 3;
  CommConfig config = FailoverConfig();
  config.failover = false;
  SpawnRanks(c, JobId::Random(), kRanks, first, config, 6000);
  ASSERT_TRUE(WaitRounds(c.sh, first, kRanks, std::vector<int64_t>(kRanks, 0), 2)) << Report(c, first, kRanks);
  c.kids.Kill(c.server_child[1], SIGKILL);
  for (int r = 0; r < kRanks; ++r) {
    const int slot = first + r;
    const ChildResult res = c.kids.Wait(3 + r, milliseconds(30000));
    EXPECT_TRUE(res.exited && res.exit_code == 2) << res.Describe() << ": " << c.sh.Message(slot);
    EXPECT_NE(c.sh.Message(slot).find(c.addresses[1]), std::string::npos) << c.sh.Message(slot);
    EXPECT_EQ(c.sh->value[slot][2], 0);
  }
}

}  // namespace
}  // namespace optcast::e2e
