// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// `optcast bench` as a real process (2 ranks, 1 server on loopback): progress, --json, --plot,
// and the OPTCAST_TRACE trace of every rank.

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "process.h"
#include "tests/support/optcast_binary.h"

namespace optcast::tooltest {
namespace {

using std::chrono::milliseconds;
using testsupport::OptcastBinary;

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) | (uint32_t(uint8_t(s[at + 2])) << 8) |
         uint32_t(uint8_t(s[at + 3]));
}

TEST(BenchCommand, ProgressJsonPlotAndRankTraces) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  TempDir dir;
  // 1K, 4K, 16K, 64K for each of server and ring: 8 steps; 1 warm-up + 2 timed + 1 check rounds.
  RunResult r = RunToEnd(
      {bin,  "bench", "--nranks", "2", "--nservers", "1",  "-b",     "1K",           "-e",     "64K",        "-f", "4",
       "-n", "2",     "-w",       "1", "--progress", "on", "--json", dir / "r.json", "--plot", dir / "r.png"},
      milliseconds(90000), {"OPTCAST_TRACE=" + dir / "rank%r.json"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;

  // Progress: one line per finished size, counting up to the whole sweep.
  for (int step = 1; step <= 8; ++step) {
    EXPECT_NE(r.err.find("(" + std::to_string(step) + "/8 sizes)"), std::string::npos) << r.err;
  }
  EXPECT_NE(r.err.find("# progress: ring 64K done (8/8 sizes), 100%"), std::string::npos) << r.err;

  nlohmann::json j = nlohmann::json::parse(ReadFile(dir / "r.json"));
  ASSERT_EQ(j["results"].size(), 8u);
  for (const auto& row : j["results"]) {
    EXPECT_EQ(row["wrong"], 0);
    EXPECT_GT(row["algbw_gbps"].get<double>(), 0);
    EXPECT_NEAR(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>() * 1.0, 1e-9);  // 2(n-1)/n = 1
  }

  // A PNG of the size the plot asks for: two 720x520 panels side by side.
  const std::string png = ReadFile(dir / "r.png");
  ASSERT_GT(png.size(), 24u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  EXPECT_EQ(BigEndian32(png, 16), 1440u);
  EXPECT_EQ(BigEndian32(png, 20), 520u);
  EXPECT_GT(png.size(), 10000u) << "an empty canvas compresses to almost nothing";

  // Each rank's trace holds every server-path AllReduce as a request span: 4 sizes x 4 rounds.
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path = dir / ("rank" + std::to_string(rank) + ".json");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    nlohmann::json t = nlohmann::json::parse(ReadFile(path));
    int begins = 0, ends = 0;
    for (const auto& e : t["traceEvents"]) {
      if (e["name"] == "allreduce" && e["ph"] == "b") ++begins;
      if (e["name"] == "allreduce" && e["ph"] == "e") ++ends;
      if (e["name"] == "process_name") {
        EXPECT_EQ(e["args"]["name"], "optcast rank " + std::to_string(rank));
      }
    }
    EXPECT_EQ(begins, 16) << path;
    EXPECT_EQ(ends, 16) << path;
  }
}

TEST(BenchCommand, PlotToAnUnwritablePlaceIsAnError) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  RunResult r = RunToEnd({bin, "bench", "--nranks", "2", "--algo", "ring", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
                          "--plot", "/nonexistent-dir/p.png"},
                         milliseconds(60000));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("--plot"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace optcast::tooltest
