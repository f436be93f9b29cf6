// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// `optcast bench --through nccl-plugin`: libnccl-net-optcast.so's CollNet driven as NCCL's proxy
// drives it, each result checked against the bench's reference, in local mode (the bench starts
// servers and ranks) and in multi-host mode (ranks started one by one against running servers).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "process.h"
#include "tests/support/optcast_binary.h"

namespace optcast::tooltest {
namespace {

using std::chrono::milliseconds;
using testsupport::OptcastBinary;

// Every row of a --json file, checked: no wrong element, a time. Returns the sizes per algo.
std::multiset<std::pair<std::string, uint64_t>> CheckRows(const std::string& path) {
  std::multiset<std::pair<std::string, uint64_t>> seen;
  nlohmann::json j = nlohmann::json::parse(ReadFile(path));
  for (const auto& row : j["results"]) {
    EXPECT_EQ(row["wrong"], 0) << row.dump();
    EXPECT_GT(row["time_us"].get<double>(), 0) << row.dump();
    seen.insert({row["algo"].get<std::string>(), row["bytes"].get<uint64_t>()});
  }
  return seen;
}

// 12 B (3 elements: odd), up to 3981312 B (7.6 chunks of 512 KiB: several requests in flight on
// both channels, the last one short). The client path runs in the same table for comparison.
TEST(PluginBench, LocalRanksAgreeWithTheReferenceNextToTheClientPath) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  TempDir dir;
  RunResult r =
      RunToEnd({bin,  "bench", "--nranks", "2", "--nservers", "2", "--algo", "server,plugin", "-b", "12", "-e", "4M",
                "-f", "24",    "-n",       "2", "-w",         "1", "--json", dir / "r.json"},
               milliseconds(120000));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# algo: plugin   ranks: 2   servers: 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# through libnccl-net-optcast.so (ncclCollNetPlugin_v12"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 channel(s) on one collComm, 512 KiB steps, 8 in flight per channel"), std::string::npos)
      << r.out;
  const auto seen = CheckRows(dir / "r.json");
  for (const char* algo : {"server", "plugin"}) {
    for (uint64_t bytes : {12ull, 288ull, 6912ull, 165888ull, 3981312ull}) {
      EXPECT_EQ(seen.count({algo, bytes}), 1u) << algo << " " << bytes;
    }
  }
}

// Small chunks on three channels: 31 requests per collective, so every channel's window of 8
// fills and later steps wait for the oldest; bfloat16, odd element count, max.
TEST(PluginBench, FullWindowsOnThreeChannels) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  TempDir dir;
  RunResult r = RunToEnd(
      {bin,           "bench",          "--nranks", "2",          "--nservers", "2",  "--algo",   "server", "--through",
       "nccl-plugin", "--plugin-chunk", "32K",      "--channels", "3",          "-d", "bfloat16", "-o",     "max",
       "-b",          "1000002",        "-e",       "1000002",    "-n",         "2",  "-w",       "1",      "--json",
       dir / "r.json"},
      milliseconds(120000));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("3 channel(s) on one collComm, 32 KiB steps"), std::string::npos) << r.out;
  const auto seen = CheckRows(dir / "r.json");
  EXPECT_EQ(seen.count({"plugin", 1000002}), 1u);
  EXPECT_EQ(seen.size(), 1u);
}

// The driver sleeps instead of yielding when a pass finds nothing to do (hosts that share cores,
// as on the emulated cluster): every result is still checked, and the header says which.
TEST(PluginBench, AnIdleDriverThatSleepsStillCompletesEveryStep) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  TempDir dir;
  RunResult r = RunToEnd({bin,
                          "bench",
                          "--nranks",
                          "3",
                          "--nservers",
                          "2",
                          "--algo",
                          "plugin",
                          "--plugin-chunk",
                          "64K",
                          "--proxy-idle-us",
                          "200",
                          "-b",
                          "4000000",
                          "-e",
                          "4000000",
                          "-n",
                          "2",
                          "-w",
                          "1",
                          "--json",
                          dir / "r.json"},
                         milliseconds(120000));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("8 in flight per channel, idle passes sleep 200 us"), std::string::npos) << r.out;
  const auto seen = CheckRows(dir / "r.json");
  EXPECT_EQ(seen.count({"plugin", 4000000}), 1u);
  // Without the flag the driver yields, as NCCL's proxy does.
  RunResult y = RunToEnd({bin, "bench", "--nranks", "2", "--nservers", "1", "--algo", "plugin", "-b", "64K", "-e",
                          "64K", "-n", "1", "-w", "0"},
                         milliseconds(60000));
  ASSERT_EQ(y.code, 0) << y.out << y.err;
  EXPECT_NE(y.out.find("idle passes yield"), std::string::npos) << y.out;
  // Out of range is refused before anything starts.
  RunResult bad =
      RunToEnd({bin, "bench", "--nranks", "2", "--algo", "plugin", "--proxy-idle-us", "200000"}, milliseconds(30000));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE((bad.out + bad.err).find("--proxy-idle-us"), std::string::npos) << bad.out << bad.err;
}

// More channels than the plugin takes requests at once (8 x 72 > 512 per collComm): it answers
// some calls with a null request, which the driver retries in order.
TEST(PluginBench, NullRequestsAreRetriedInOrder) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  TempDir dir;
  RunResult r = RunToEnd(
      {bin,  "bench",      "--nranks", "2",  "--nservers", "2",           "--algo",  "plugin", "--plugin-chunk",
       "1K", "--channels", "72",       "-d", "int32",      "-b",          "1000004", "-e",     "1000004",
       "-n", "1",          "-w",       "0",  "--json",     dir / "r.json"},
      milliseconds(120000));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("to call iallreduce again later (null request)"), std::string::npos) << r.out;
  const auto seen = CheckRows(dir / "r.json");
  EXPECT_EQ(seen.count({"plugin", 1000004}), 1u);
}

// A port on loopback that nothing listens on (the rendezvous of the next test).
uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// As on several hosts: two running servers, two rank processes meeting at a rendezvous.
TEST(PluginBench, MultiHostRanksAgainstRunningServers) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  TempDir dir;
  std::string servers;
  std::vector<std::unique_ptr<Process>> procs;
  for (int i = 0; i < 2; ++i) {
    procs.push_back(std::make_unique<Process>(std::vector<std::string>{bin, "server", "--listen", "127.0.0.1:0"}));
    ASSERT_TRUE(procs.back()->WaitForOutput("listening on", milliseconds(10000))) << procs.back()->err();
    std::smatch m;
    const std::string out = procs.back()->out();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("listening on (127\\.0\\.0\\.1:\\d+)"))) << out;
    servers += (i ? "," : "") + m[1].str();
  }
  const std::string rendezvous = "127.0.0.1:" + std::to_string(FreePort());
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> argv = {bin,         "bench", "--rank",       std::to_string(r),
                                     "--nranks",  "2",     "--rendezvous", rendezvous,
                                     "--servers", servers, "--through",    "nccl-plugin",
                                     "-b",        "1M",    "-e",           "1M",
                                     "-n",        "2",     "-w",           "1"};
    if (r == 0) argv.insert(argv.end(), {"--json", dir / "r.json"});
    ranks.push_back(std::make_unique<Process>(argv));
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r]->Wait(milliseconds(60000)), 0) << ranks[r]->out() << ranks[r]->err();
  }
  const auto seen = CheckRows(dir / "r.json");
  EXPECT_EQ(seen.count({"plugin", 1u << 20}), 1u);
}

TEST(PluginBench, MissingPluginSaysWhereToPointIt) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  RunResult r = RunToEnd({bin, "bench", "--nranks", "2", "--through", "nccl-plugin", "--plugin",
                          "/nonexistent/libnccl-net-optcast.so", "-b", "8", "-e", "8"},
                         milliseconds(30000));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--plugin /nonexistent/libnccl-net-optcast.so is not a file"), std::string::npos) << r.err;
}

// NCCL sums through CollNet and divides on the GPU, so the plugin path has no avg to measure.
TEST(PluginBench, AvgIsRefusedBeforeAnyRankStarts) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  RunResult r = RunToEnd({bin, "bench", "--nranks", "2", "--through", "nccl-plugin", "-o", "avg", "-b", "8", "-e", "8"},
                         milliseconds(30000));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("use -o sum for the plugin path"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("# algo:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace optcast::tooltest
