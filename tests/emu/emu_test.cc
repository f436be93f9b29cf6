// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// End-to-end test of `optcast emu run`: a 2-worker, 1-server cluster at 200 Mbit/s runs the
// reduction servers, the Optcast ring and Gloo, and the cluster is gone afterwards. Needs root and
// network namespaces; skipped (with the reason) otherwise.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// Runs a shell command; returns its exit code and appends its output to `out`.
int Shell(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out->append(buf.data(), n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string EmuNamespaces() {
  std::string out;
  Shell("ip netns list | grep -o '^optcast-emu-[^ ]*'", &out);
  return out;
}

class EmuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    optcast_ = Env("OPTCAST_BIN");
    gloo_ = Env("OPTCAST_GLOO_BENCH");
    if (optcast_.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
    if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces: run `sudo ctest -L emu`";
    std::string out;
    if (Shell("ip netns list", &out) != 0) GTEST_SKIP() << "`ip netns` is unavailable: " << out;
  }
  void TearDown() override {
    if (!optcast_.empty() && geteuid() == 0) {
      std::string out;
      Shell(optcast_ + " emu down", &out);  // even after a failed assertion
    }
  }

  std::string optcast_;
  std::string gloo_;
};

TEST_F(EmuTest, RunComparesAlgorithmsAndCleansUp) {
  const std::string json_path =
      std::filesystem::temp_directory_path() / ("optcast-emu-test-" + std::to_string(getpid()) + ".json");
  std::string cmd =
      optcast_ + " emu run --workers 2 --servers 1 --rate 200mbit -b 1M -e 1M -n 3 -w 1 --json " + json_path;
  if (!gloo_.empty()) cmd += " --gloo-bench " + gloo_;
  std::string out;
  const int rc = Shell(cmd, &out);
  ASSERT_EQ(rc, 0) << cmd << "\n" << out;

  std::ifstream f(json_path);
  ASSERT_TRUE(f.good()) << "no JSON at " << json_path << "\n" << out;
  nlohmann::json j;
  f >> j;
  std::filesystem::remove(json_path);
  EXPECT_EQ(j["cluster"]["workers"], 2);
  EXPECT_EQ(j["cluster"]["servers"], 1);
  bool seen_server = false, seen_ring = false, seen_gloo = false;
  for (const auto& row : j["results"]) {
    const std::string algo = row["algo"];
    EXPECT_EQ(row["wrong"].get<uint64_t>(), 0u) << algo;
    EXPECT_EQ(row["bytes"].get<uint64_t>(), 1u << 20) << algo;
    EXPECT_GT(row["algbw_gbps"].get<double>(), 0.0) << algo;
    // 200 Mbit/s links: nothing can beat the bound (a little slack for timer rounding).
    EXPECT_LT(row["fraction_of_bound"].get<double>(), 1.05) << algo;
    seen_server |= algo == "server";
    seen_ring |= algo == "ring";
    seen_gloo |= algo == "gloo";
  }
  EXPECT_TRUE(seen_server) << out;
  EXPECT_TRUE(seen_ring) << out;
  if (gloo_.empty()) {
    std::printf("note: optcast-gloo-bench was not built (libgloo-dev missing); Gloo row not checked\n");
  } else {
    EXPECT_TRUE(seen_gloo) << out;
  }
  EXPECT_EQ(EmuNamespaces(), "") << "`optcast emu run` left namespaces behind";
}

TEST_F(EmuTest, UpStatusDownIsIdempotent) {
  std::string out;
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 2 --servers 1 --rate 200mbit", &out), 0) << out;
  EXPECT_NE(EmuNamespaces().find("optcast-emu-w1"), std::string::npos);
  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu status", &out), 0) << out;
  EXPECT_NE(out.find("10.99.0.101"), std::string::npos) << out;
  // A leftover server process must not keep a namespace alive through `down`.
  out.clear();
  ASSERT_EQ(Shell("ip netns exec optcast-emu-s0 " + optcast_ +
                      " server --listen 10.99.0.101:8918 --log-level warn >/dev/null 2>&1 & sleep 0.3",
                  &out),
            0)
      << out;
  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu down", &out), 0) << out;
  EXPECT_EQ(EmuNamespaces(), "");
  out.clear();
  EXPECT_EQ(Shell(optcast_ + " emu down", &out), 0) << "down twice: " << out;
}

}  // namespace
