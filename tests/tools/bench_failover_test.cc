// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// `optcast bench` with four rank processes over three running `optcast server` processes, two of
// which are SIGKILLed while it runs: every iteration completes, every size's check is exact, the
// bench says in which sizes a failover happened, the ranks' traces show it, and the server left
// counts both failovers in its metrics. With --no-failover the same death ends the run with an
// error naming the server.

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process.h"
#include "tests/support/optcast_binary.h"

namespace optcast::tooltest {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testsupport::OptcastBinary;

// An `optcast server` process on loopback with its metrics page, both on ports the kernel picks.
struct RunningServer {
  std::unique_ptr<Process> proc;
  std::string address;
  int metrics_port = -1;

  ::testing::AssertionResult Start() {
    proc = std::make_unique<Process>(std::vector<std::string>{OptcastBinary(), "server", "--listen", "127.0.0.1:0",
                                                              "--metrics-listen", "127.0.0.1:0"});
    const auto deadline = Clock::now() + milliseconds(10000);
    std::smatch listen, metrics;
    for (;;) {
      const std::string out = proc->out() + proc->err();
      if (std::regex_search(out, listen, std::regex("listening on (127\\.0\\.0\\.1:\\d+)")) &&
          std::regex_search(out, metrics, std::regex("metrics on http://127\\.0\\.0\\.1:(\\d+)/metrics"))) {
        address = listen[1].str();
        metrics_port = std::stoi(metrics[1].str());
        return ::testing::AssertionSuccess();
      }
      if (Clock::now() > deadline) return ::testing::AssertionFailure() << "server did not start: " << out;
      std::this_thread::sleep_for(milliseconds(20));
    }
  }

  // The value of `name` on the metrics page, or -1.
  double Metric(const std::string& name) const {
    httplib::Client cli("127.0.0.1", metrics_port);
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(5, 0);
    auto res = cli.Get("/metrics");
    std::smatch m;
    if (!res || res->status != 200 || !std::regex_search(res->body, m, std::regex("\n" + name + " ([0-9.e+]+)"))) {
      return -1;
    }
    return std::stod(m[1].str());
  }
};

// Polls the bench's per-iteration log until it has `lines` lines (timed iterations done), or
// `limit` passes.
bool WaitForIterations(const std::string& path, int lines, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    const std::string text = ReadFile(path);
    if (std::count(text.begin(), text.end(), '\n') >= lines) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return false;
}

int CountOf(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

TEST(BenchFailover, TwoOfThreeServersKilledUnderARunningBenchLoseNoIteration) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  TempDir dir;
  RunningServer servers[3];
  for (auto& s : servers) ASSERT_TRUE(s.Start());
  const std::string list = servers[0].address + "," + servers[1].address + "," + servers[2].address;
  // 64K to 2M: 6 sizes of 2 warm-up, 30 timed and 1 checked round each, over 4 ranks.
  constexpr int kSizes = 6, kIters = 30;
  Process bench({bin,
                 "bench",
                 "--servers",
                 list,
                 "--nranks",
                 "4",
                 "--algo",
                 "server",
                 "-b",
                 "64K",
                 "-e",
                 "2M",
                 "-f",
                 "2",
                 "-n",
                 std::to_string(kIters),
                 "-w",
                 "2",
                 "--timeout-ms",
                 "20000",
                 "--json",
                 dir / "r.json",
                 "--iteration-times",
                 dir / "times.txt"},
                {"OPTCAST_TRACE=" + dir / "rank%r.json"});
  // The first server (the one that would announce a failover) dies a third of the way into the
  // third size's timed rounds, the third server likewise into the fifth size's.
  ASSERT_TRUE(WaitForIterations(dir / "times.txt", 2 * kIters + 10, milliseconds(60000))) << bench.out() << bench.err();
  servers[0].proc->Signal(SIGKILL);
  ASSERT_TRUE(WaitForIterations(dir / "times.txt", 4 * kIters + 10, milliseconds(60000))) << bench.out() << bench.err();
  servers[2].proc->Signal(SIGKILL);
  ASSERT_EQ(bench.Wait(milliseconds(120000)), 0) << bench.out() << bench.err();
  const std::string out = bench.out();

  // Every size checked exact, and where the failovers happened said so.
  EXPECT_NE(out.find("# Out of bounds values : 0 OK"), std::string::npos) << out;
  const std::regex line("# failover during this size: (\\d+) failover\\(s\\); (\\d+) server\\(s\\) left");
  int failovers = 0, lines = 0;
  std::string last_left;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) {
    failovers += std::stoi((*it)[1].str());
    last_left = (*it)[2].str();
    ++lines;
  }
  EXPECT_EQ(failovers, 2) << out;
  EXPECT_GE(lines, 1) << out;
  EXPECT_EQ(last_left, "1") << out;

  nlohmann::json j = nlohmann::json::parse(ReadFile(dir / "r.json"));
  ASSERT_EQ(j["results"].size(), static_cast<size_t>(kSizes));
  for (const auto& row : j["results"]) EXPECT_EQ(row["wrong"], 0) << row;

  // Every timed iteration completed: rank 0 logs each one, with the failovers so far.
  std::istringstream times(ReadFile(dir / "times.txt"));
  int iterations = 0;
  unsigned last_failovers = 0;
  for (std::string l; std::getline(times, l);) {
    if (l.empty() || l[0] == '#') continue;
    ++iterations;
    std::istringstream fields(l);
    std::string algo;
    unsigned long long bytes = 0;
    int i = 0;
    double end_s = 0, us = 0;
    fields >> algo >> bytes >> i >> end_s >> us >> last_failovers;
  }
  EXPECT_EQ(iterations, kSizes * kIters);
  EXPECT_EQ(last_failovers, 2u);

  // Each rank's trace marks both servers lost and both failovers applied.
  for (int rank = 0; rank < 4; ++rank) {
    const std::string path = dir / ("rank" + std::to_string(rank) + ".json");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    nlohmann::json t = nlohmann::json::parse(ReadFile(path));
    int lost = 0, applied = 0;
    for (const auto& e : t["traceEvents"]) {
      if (e["name"] == "server lost") ++lost;
      if (e["name"] == "failover") ++applied;
    }
    EXPECT_EQ(lost, 2) << path;
    EXPECT_EQ(applied, 2) << path;
  }

  // The server left applied both failovers, and logged each once (as it applied it; as the first
  // server left, it also logged announcing it).
  EXPECT_EQ(servers[1].Metric("optcast_failovers_total"), 2);
  const std::string log = servers[1].proc->out() + servers[1].proc->err();
  EXPECT_EQ(CountOf(log, "failover to epoch 1: server(s)"), 1) << log;
  EXPECT_EQ(CountOf(log, "failover to epoch 2: server(s)"), 1) << log;
}

TEST(BenchFailover, WithNoFailoverADeadServerEndsTheRunNamingIt) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  RunningServer servers[2];
  for (auto& s : servers) ASSERT_TRUE(s.Start());
  TempDir dir;
  Process bench({bin,
                 "bench",
                 "--servers",
                 servers[0].address + "," + servers[1].address,
                 "--nranks",
                 "2",
                 "--algo",
                 "server",
                 "-b",
                 "1M",
                 "-e",
                 "1M",
                 "-n",
                 "100000",
                 "-w",
                 "1",
                 "--timeout-ms",
                 "20000",
                 "--iteration-times",
                 dir / "times.txt",
                 "--no-failover"});
  ASSERT_TRUE(WaitForIterations(dir / "times.txt", 3, milliseconds(60000))) << bench.out() << bench.err();
  servers[1].proc->Signal(SIGKILL);
  const int code = bench.Wait(milliseconds(30000));
  EXPECT_NE(code, 0) << bench.out() << bench.err();
  EXPECT_NE(code, -1) << "the bench did not end after its server died: " << bench.err();
  EXPECT_NE(bench.err().find(servers[1].address), std::string::npos) << bench.err();
  EXPECT_EQ(bench.out().find("# failover during this size"), std::string::npos) << bench.out();
}

}  // namespace
}  // namespace optcast::tooltest
