// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Soak: several jobs of several ranks at once against one `optcast server` process, for a bounded
// time, with random collectives, types and sizes, and ranks killed at random moments. Every
// result is checked against the reference; every rank of a job with a killed member must end with
// an error, not a hang; afterwards the server's RSS and descriptors are back at their baseline.
//
// OPTCAST_SOAK_SECONDS sets the duration (default 20).

#include <gtest/gtest.h>
#include <signal.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "checks.h"
#include "harness.h"
#include "server_process.h"
#include "soak_workload.h"

namespace optcast::daemon {
namespace {

using e2e::Children;
using e2e::ChildResult;
using e2e::CommConfig;
using e2e::Shared;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr int kJobsAtOnce = 3;
constexpr int kMaxRanks = 3;
constexpr int kServerTimeoutMs = 2000;

// Exit codes of a rank: 0 every collective right; 1 a wrong result (a bug); 3 ended by an error.
int RankBody(Shared& sh, int slot, const std::string& server, const JobId& job, int nranks, int rank, uint64_t job_seed,
             int ncoll) {
  CommConfig cfg;
  cfg.timeout = milliseconds(kServerTimeoutMs * 3);
  cfg.connect_timeout = milliseconds(5000);
  std::unique_ptr<Communicator> comm;
  Status st = e2e::MakeComm({server}, job, nranks, rank, cfg, &comm);
  if (!st.ok()) {
    sh.Note(slot, "create: " + st.ToString());
    return 3;
  }
  for (int i = 0; i < ncoll; ++i) {
    const CollPlan p = PlanFor(job_seed, i);
    std::string err;
    st = RunChecked(*comm, p, nranks, rank, &err);
    if (!st.ok()) {
      sh.Note(slot, "collective " + std::to_string(i) + ": " + st.ToString());
      return 3;
    }
    if (!err.empty()) {
      return sh.Fail(slot, "collective " + std::to_string(i) + " " + Describe(p) + ": " + err);
    }
    sh->value[slot][0] += 1;
  }
  return 0;
}

struct Totals {
  int jobs = 0, ranks = 0, kills = 0, errors = 0;
  int64_t collectives = 0;
};

// Waits until the server holds only its baseline descriptors (connections of ended jobs closed).
bool WaitForFds(const ServerProcess& srv, int fds, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (srv.OpenFds() != fds) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

// One wave: kJobsAtOnce jobs at once, some with a rank killed part way.
void RunWave(const ServerProcess& srv, std::mt19937_64& rng, int wave, Totals* totals) {
  Shared sh;
  Children kids;
  struct JobRun {
    int first_slot, nranks;
    bool kill;
  };
  std::vector<JobRun> jobs;
  int slot = 0;
  for (int j = 0; j < kJobsAtOnce; ++j) {
    const int nranks = 2 + static_cast<int>(rng() % (kMaxRanks - 1));
    const bool kill = rng() % 3 == 0;
    const JobId id = JobId::Random();
    const uint64_t seed = rng();
    const int ncoll = 3 + static_cast<int>(rng() % 6);
    jobs.push_back({slot, nranks, kill});
    for (int r = 0; r < nranks; ++r, ++slot) {
      kids.Spawn([&sh, s = slot, addr = srv.address(), id, nranks, r, seed, ncoll] {
        return RankBody(sh, s, addr, id, nranks, r, seed, ncoll);
      });
    }
    totals->jobs += 1;
    totals->ranks += nranks;
  }
  kids.Start();
  // Kill one rank of each chosen job at a random moment of its life.
  std::vector<int> killed(slot, 0);
  for (const JobRun& j : jobs) {
    if (!j.kill) continue;
    std::this_thread::sleep_for(milliseconds(20 + rng() % 300));
    const int victim = j.first_slot + static_cast<int>(rng() % j.nranks);
    kids.Kill(victim, SIGKILL);
    killed[victim] = 1;
    totals->kills += 1;
  }
  // A rank that survives a killed peer must end within a few job timeouts, with an error.
  const std::vector<ChildResult> results = kids.WaitAll(milliseconds(kServerTimeoutMs * 10));
  for (const JobRun& j : jobs) {
    for (int s = j.first_slot; s < j.first_slot + j.nranks; ++s) {
      const ChildResult& r = results[s];
      totals->collectives += sh->value[s][0];
      EXPECT_FALSE(r.timed_out) << "wave " << wave << " slot " << s << " hung: " << sh.Message(s);
      if (killed[s]) continue;
      if (j.kill) {
        EXPECT_TRUE(r.exited && (r.exit_code == 0 || r.exit_code == 3))
            << "wave " << wave << " slot " << s << ": " << r.Describe() << ": " << sh.Message(s);
        if (r.exited && r.exit_code == 3) {
          totals->errors += 1;
          EXPECT_FALSE(sh.Message(s).empty());
        }
      } else {
        EXPECT_TRUE(r.exited && r.exit_code == 0)
            << "wave " << wave << " slot " << s << " (no rank killed): " << r.Describe() << ": " << sh.Message(s);
      }
    }
  }
}

TEST(Soak, RandomJobsAndKilledRanksLeaveTheServerAsTheyFoundIt) {
  int seconds = 20;
  if (const char* env = std::getenv("OPTCAST_SOAK_SECONDS")) seconds = std::max(1, std::atoi(env));
  ServerProcess srv;
  E2E_ASSERT_OK(
      srv.Start({"--listen", "127.0.0.1:0", "--timeout-ms", std::to_string(kServerTimeoutMs), "--log-level", "warn"}));
  const int fds_idle = srv.OpenFds();
  std::mt19937_64 rng(20261130);
  Totals warm;
  // A first wave warms the allocator and the buffer pool; the baseline is what an idle server
  // holds after it.
  RunWave(srv, rng, 0, &warm);
  ASSERT_TRUE(WaitForFds(srv, fds_idle, milliseconds(15000))) << "fds " << srv.OpenFds() << " vs " << fds_idle;
  std::this_thread::sleep_for(milliseconds(2500));  // the server gives idle memory back after a second
  const uint64_t rss_base = srv.RssBytes();

  Totals t;
  const auto start = Clock::now();
  int wave = 1;
  uint64_t rss_peak = rss_base;
  while (Clock::now() - start < std::chrono::seconds(seconds) && !HasFailure()) {
    RunWave(srv, rng, wave++, &t);
    rss_peak = std::max(rss_peak, srv.RssBytes());
  }
  const double took = std::chrono::duration<double>(Clock::now() - start).count();

  ASSERT_TRUE(WaitForFds(srv, fds_idle, milliseconds(15000)))
      << "descriptors did not return to the baseline: " << srv.OpenFds() << " vs " << fds_idle;
  std::this_thread::sleep_for(milliseconds(2500));
  const uint64_t rss_end = srv.RssBytes();
  std::printf("soak: %.1f s, %d waves of %d jobs at once: %d jobs, %d ranks, %" PRId64
              " collectives checked, %d ranks killed, %d ranks ended by an error; server RSS %.1f MiB "
              "idle before, %.1f MiB at most between waves, %.1f MiB idle after; descriptors %d -> %d\n",
              took, wave - 1, kJobsAtOnce, t.jobs, t.ranks, t.collectives, t.kills, t.errors, rss_base / 1048576.0,
              rss_peak / 1048576.0, rss_end / 1048576.0, fds_idle, srv.OpenFds());
  EXPECT_GT(t.collectives, 0);
  if (kSanitizedAllocator) {
    std::printf("soak: RSS not checked: the sanitizer's allocator keeps freed memory in quarantine\n");
  } else {
    EXPECT_LE(rss_end, rss_base + (8u << 20)) << "the server kept memory after the load ended";
  }
  // The server is still healthy: a last job runs.
  CommConfig cfg;
  cfg.timeout = milliseconds(8000);
  for (const Status& st : e2e::RunAllReduceOnThreads({srv.address()}, 2, 4099, cfg, 77)) {
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  srv.Signal(SIGTERM);
  int code = -1;
  ASSERT_TRUE(srv.Wait(milliseconds(10000), &code));
  EXPECT_EQ(code, 0) << srv.Output();
}

}  // namespace
}  // namespace optcast::daemon
