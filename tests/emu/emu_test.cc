// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// End-to-end test of `optcast emu run`: a 2-worker, 1-server cluster at 200 Mbit/s runs the
// reduction servers, the Optcast ring and Gloo, and the cluster is gone afterwards. Needs root and
// network namespaces; skipped (with the reason) otherwise.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
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

  // Runs `optcast emu run ARGS --json FILE`, its output into *out, and reads FILE into *j
  // (removing it).
  void RunEmuJson(const std::string& args, const std::string& tag, nlohmann::json* j, std::string* out) {
    const std::string json_path =
        std::filesystem::temp_directory_path() / ("optcast-emu-" + tag + "-" + std::to_string(getpid()) + ".json");
    const std::string cmd = optcast_ + " emu run " + args + " --json " + json_path;
    const int rc = Shell(cmd, out);
    ASSERT_EQ(rc, 0) << cmd << "\n" << *out;
    std::ifstream f(json_path);
    ASSERT_TRUE(f.good()) << "no JSON at " << json_path << "\n" << *out;
    f >> *j;
    std::filesystem::remove(json_path);
  }

  std::string optcast_;
  std::string gloo_;
};

TEST_F(EmuTest, RunComparesAlgorithmsAndCleansUp) {
  std::string args = "--workers 2 --servers 1 --rate 200mbit -b 1M -e 1M -n 3 -w 1";
  if (!gloo_.empty()) args += " --gloo-bench " + gloo_;
  nlohmann::json j;
  std::string out;
  ASSERT_NO_FATAL_FAILURE(RunEmuJson(args, "test", &j, &out));
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

// The server path through libnccl-net-optcast.so's CollNet (`optcast bench --through
// nccl-plugin` on every worker): checked by the bench, bounded like the server path.
TEST_F(EmuTest, PluginPathHasTheServerBound) {
  nlohmann::json j;
  std::string out;
  ASSERT_NO_FATAL_FAILURE(
      RunEmuJson("--workers 2 --servers 2 --algo plugin --rate 200mbit -b 1M -e 1M -n 3 -w 1", "plugin", &j, &out));
  ASSERT_EQ(j["results"].size(), 1u) << out;
  const auto& row = j["results"][0];
  EXPECT_EQ(row["algo"], "plugin");
  EXPECT_EQ(row["wrong"].get<uint64_t>(), 0u);
  EXPECT_EQ(row["bound_gbps"].get<double>(), j["bounds_gbps"]["server"].get<double>());
  EXPECT_GT(row["fraction_of_bound"].get<double>(), 0.0);
  EXPECT_LT(row["fraction_of_bound"].get<double>(), 1.05);
  EXPECT_EQ(EmuNamespaces(), "") << "`optcast emu run` left namespaces behind";
}

// A depth-2 aggregation tree on the emulated network: 4 workers, 2 leaves (one per pair of
// workers), a root; results checked by the bench, time within the tree's bound.
TEST_F(EmuTest, TreeOfTwoLeavesAndARoot) {
  nlohmann::json j;
  std::string out;
  ASSERT_NO_FATAL_FAILURE(RunEmuJson(
      "--workers 4 --servers 3 --tree --algo server --rate 200mbit -b 1M -e 1M -n 3 -w 1", "tree", &j, &out));
  EXPECT_EQ(j["cluster"]["tree"], true);
  int rows = 0;
  for (const auto& row : j["results"]) {
    ++rows;
    EXPECT_EQ(row["algo"], "server");
    EXPECT_EQ(row["wrong"].get<uint64_t>(), 0u);
    EXPECT_GT(row["algbw_gbps"].get<double>(), 0.0);
    EXPECT_LT(row["fraction_of_bound"].get<double>(), 1.05);
  }
  EXPECT_EQ(rows, 1) << out;
  EXPECT_EQ(EmuNamespaces(), "") << "`optcast emu run --tree` left namespaces behind";
}

// A depth-3 tree on the emulated network (a root, two inner servers, a leaf under each, two
// workers per leaf): every datatype and op through it, each result checked by the ranks.
TEST_F(EmuTest, TreeOfDepth3CarriesEveryTypeAndOp) {
  nlohmann::json j;
  std::string out;
  ASSERT_NO_FATAL_FAILURE(
      RunEmuJson("--workers 4 --servers 5 --tree-depth 3 --algo server --rate 1gbit -b 64K "
                 "-e 64K -n 1 -w 0 --chunk 16K --check-types",
                 "tree3", &j, &out));
  EXPECT_EQ(j["cluster"]["tree"], true);
  EXPECT_EQ(j["cluster"]["tree_depth"], 3);
  std::set<std::string> pairs;
  for (const auto& c : j["type_checks"]) {
    EXPECT_EQ(c["wrong"].get<uint64_t>(), 0u) << c.dump();
    pairs.insert(c["dtype"].get<std::string>() + " " + c["op"].get<std::string>());
  }
  EXPECT_EQ(pairs.size(), 50u) << "10 datatypes x 5 ops\n" << out;
  EXPECT_NE(out.find("50 pairs, 0 wrong values"), std::string::npos) << out;
  EXPECT_EQ(EmuNamespaces(), "") << "`optcast emu run --tree-depth 3` left namespaces behind";
}

// Racks: 2 racks of 2 workers, the 2 flat servers in a rack of their own, 400 Mbit/s host links,
// 100 Mbit/s uplinks. Every worker's stripes for both servers come down the server rack's one
// uplink: 4 buffers through 100 Mbit/s, a bound of 3.125 MB/s, a sixteenth of the host links'
// 50 MB/s and an eighth of what two servers allow on one switch (R·S/W). The run must sit at
// that bound: above it the uplink is not limited, well below it something else binds. The ring
// is held by the same uplinks, which its one cross-rack flow each way has to itself.
TEST_F(EmuTest, FlatServersInTheirOwnRackAreBoundByItsUplink) {
  nlohmann::json j;
  std::string out;
  ASSERT_NO_FATAL_FAILURE(RunEmuJson(
      "--workers 4 --servers 2 --racks 2 --uplink 100mbit --algo server,ring --rate 400mbit -b 2M -e 2M -n 2 -w 1",
      "racks", &j, &out));
  EXPECT_EQ(j["cluster"]["racks"], 2);
  EXPECT_EQ(j["cluster"]["rack_of"]["workers"], nlohmann::json::parse("[0, 0, 1, 1]"));
  EXPECT_EQ(j["cluster"]["rack_of"]["servers"], nlohmann::json::parse("[2, 2]"));
  EXPECT_EQ(j["bound_set_by"]["server"], "rack 2's uplink") << out;
  const double uplink_bound = 100e6 / 8 / 4;  // four workers' buffers down one uplink
  // The ring crosses each worker rack's uplink with one flow each way, 2(W-1)/W = 1.5 buffers.
  const double ring_bound = 100e6 / 8 / 1.5;
  int rows = 0;
  for (const auto& row : j["results"]) {
    ++rows;
    const std::string algo = row["algo"];
    const double bound = algo == "server" ? uplink_bound : ring_bound;
    const double algbw = row["algbw_gbps"].get<double>() * 1e9;
    EXPECT_EQ(row["wrong"].get<uint64_t>(), 0u) << algo;
    EXPECT_NEAR(row["bound_gbps"].get<double>() * 1e9, bound, bound * 1e-6) << algo;
    EXPECT_LT(algbw, 1.05 * bound) << algo << ": faster than its uplink allows\n" << out;
    EXPECT_GT(algbw, 0.5 * bound) << algo << ": far below its bound\n" << out;
  }
  EXPECT_EQ(rows, 2) << out;
  EXPECT_EQ(EmuNamespaces(), "") << "`optcast emu run --racks` left namespaces behind";
}

// A tree over racks: 2 racks of 2 workers, 2 trees (a leaf of each in every rack), root j in rack
// j. Results checked by the bench; the roots' uplinks carry one partial per rack, so the leaves'
// links bind (33 MB/s), not the 400 Mbit/s uplinks (50 MB/s).
TEST_F(EmuTest, TreesOverRacksSpreadTheirRoots) {
  nlohmann::json j;
  std::string out;
  ASSERT_NO_FATAL_FAILURE(RunEmuJson(
      "--workers 4 --servers 6 --tree --racks 2 --uplink 400mbit --algo server --rate 400mbit -b 1M -e 1M -n 2 -w 1",
      "racktree", &j, &out));
  EXPECT_EQ(j["cluster"]["rack_of"]["servers"], nlohmann::json::parse("[0, 1, 0, 0, 1, 1]"));
  ASSERT_EQ(j["results"].size(), 1u) << out;
  const auto& row = j["results"][0];
  EXPECT_EQ(row["wrong"].get<uint64_t>(), 0u);
  // A leaf carries 2 workers' halves and the root's result: 1.5 buffers each way.
  EXPECT_NEAR(row["bound_gbps"].get<double>(), 400e6 / 8 / 1.5 / 1e9, 1e-6);
  EXPECT_LT(row["fraction_of_bound"].get<double>(), 1.05);
  EXPECT_NE(j["bound_set_by"]["server"].get<std::string>().find("'s link"), std::string::npos) << out;
  std::string up;
  EXPECT_NE(Shell(optcast_ + " emu up --workers 2 --servers 1 --racks 2 --rate 200mbit", &up), 0);
  EXPECT_NE(up.find("--uplink"), std::string::npos) << up;
  EXPECT_EQ(EmuNamespaces(), "");
}

TEST_F(EmuTest, UpStatusDownIsIdempotent) {
  std::string out;
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 2 --servers 1 --rate 200mbit", &out), 0) << out;
  EXPECT_NE(EmuNamespaces().find("optcast-emu-w1"), std::string::npos);
  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu status", &out), 0) << out;
  EXPECT_NE(out.find("10.99.0.101"), std::string::npos) << out;
  // Each host's link rate (its root class's, not a per-destination class's guaranteed minimum).
  EXPECT_TRUE(std::regex_search(out, std::regex("optcast-emu-w0 +10\\.99\\.0\\.1/24 +200Mbit "))) << out;
  EXPECT_EQ(out.find("8Kbit"), std::string::npos) << out;
  // A leftover server process must not keep a namespace alive through `down`.
  out.clear();
  ASSERT_EQ(Shell("ip netns exec optcast-emu-s0 " + optcast_ +
                      " server --listen 10.99.0.101:8918 --insecure --log-level warn >/dev/null 2>&1 & sleep 0.3",
                  &out),
            0)
      << out;
  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu down", &out), 0) << out;
  EXPECT_EQ(EmuNamespaces(), "");
  out.clear();
  EXPECT_EQ(Shell(optcast_ + " emu down", &out), 0) << "down twice: " << out;
}

// --tcp-cc and --queue-packets reach every host and every switch port, a run under them reports
// them and still gets every result right, and a congestion control the tool does not offer is
// refused before anything is built.
TEST_F(EmuTest, CongestionControlAndQueueLengthAreSetPerHost) {
  std::string out, allowed_before, allowed_after_up;
  ASSERT_EQ(Shell("cat /proc/sys/net/ipv4/tcp_allowed_congestion_control", &allowed_before), 0);
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 2 --servers 1 --rate 200mbit --tcp-cc reno --queue-packets 100", &out),
            0)
      << out;
  for (const char* ns : {"optcast-emu-w0", "optcast-emu-w1", "optcast-emu-s0"}) {
    out.clear();
    ASSERT_EQ(Shell(std::string("ip netns exec ") + ns + " sysctl -n net.ipv4.tcp_congestion_control", &out), 0);
    EXPECT_EQ(out, "reno\n") << ns;
  }
  // Both queues of every port: the priority DSCP's and the rest's.
  for (const char* port : {"w0", "w1", "s0"}) {
    out.clear();
    ASSERT_EQ(Shell(std::string("tc -n optcast-emu-sw qdisc show dev ") + port, &out), 0);
    EXPECT_NE(out.find("pfifo 20: parent 1:2 limit 100p"), std::string::npos) << port << ": " << out;
    EXPECT_NE(out.find("pfifo 30: parent 1:fff0 limit 100p"), std::string::npos) << port << ": " << out;
  }
  out.clear();
  ASSERT_EQ(
      Shell(optcast_ + " emu up --workers 1 --servers 1 --rate 200mbit --queue-packets 100 --priority-dscp off", &out),
      0)
      << out;
  out.clear();
  ASSERT_EQ(Shell("tc -n optcast-emu-sw qdisc show dev s0", &out), 0);
  EXPECT_NE(out.find("pfifo 10: parent 1:1 limit 100p"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 2 --servers 1 --rate 200mbit --tcp-cc reno --queue-packets 100", &out),
            0)
      << out;
  out.clear();
  ASSERT_EQ(Shell("sysctl -n net.ipv4.tcp_congestion_control", &out), 0);
  EXPECT_NE(out, "reno\n") << "the machine's own setting must not change";
  out.clear();
  ASSERT_EQ(Shell("cat /proc/sys/net/ipv4/tcp_allowed_congestion_control", &allowed_after_up), 0);
  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu down", &out), 0) << out;
  out.clear();
  ASSERT_EQ(Shell("cat /proc/sys/net/ipv4/tcp_allowed_congestion_control", &out), 0);
  EXPECT_EQ(out, allowed_before) << "down puts the machine's allowed list back (it was " << allowed_after_up << ")";

  nlohmann::json j;
  ASSERT_NO_FATAL_FAILURE(RunEmuJson(
      "--workers 2 --servers 2 --rate 200mbit --tcp-cc cubic --queue-packets 100 -b 256K -e 1M -f 4 -n 2 -w 1 "
      "--algo server,ring",
      "cc", &j, &out));
  EXPECT_EQ(j["cluster"]["tcp_cc"], "cubic");
  EXPECT_EQ(j["cluster"]["queue_packets"], 100);
  EXPECT_EQ(j["cluster"]["host_queue"], "fair");
  EXPECT_NE(out.find("cubic, switch queues of 100 packets"), std::string::npos) << out;
  for (const auto& row : j["results"]) EXPECT_EQ(row["wrong"].get<uint64_t>(), 0u) << row.dump();

  out.clear();
  EXPECT_NE(Shell(optcast_ + " emu up --workers 1 --servers 1 --tcp-cc vegas", &out), 0);
  EXPECT_NE(out.find("'vegas' is not one of bbr, cubic, reno"), std::string::npos) << out;
  EXPECT_EQ(EmuNamespaces(), "");
}

// The burst HTB reports for the first class of `tc class show` output, in bytes (tc rounds it to
// its clock's ticks), or 0.
uint64_t FirstBurst(const std::string& tc_classes) {
  const size_t at = tc_classes.find(" burst ");
  return at == std::string::npos ? 0 : std::strtoull(tc_classes.c_str() + at + 7, nullptr, 10);
}

// --burst sets every shaped link's burst, switch ports and host queues alike; by default it is
// 16 frames at MTU 9000 and 200 Mbit/s; less than a frame is refused before anything is built.
TEST_F(EmuTest, BurstIsSetOnEveryLink) {
  std::string out;
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 1 --servers 1 --rate 200mbit --burst 18028", &out), 0) << out;
  for (const char* cmd : {"tc -n optcast-emu-sw class show dev w0", "tc -n optcast-emu-sw class show dev s0",
                          "tc -n optcast-emu-w0 class show dev eth0", "tc -n optcast-emu-s0 class show dev eth0"}) {
    out.clear();
    ASSERT_EQ(Shell(cmd, &out), 0) << out;
    EXPECT_NEAR(static_cast<double>(FirstBurst(out)), 18028.0, 180.0) << cmd << ": " << out;
  }
  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 1 --servers 1 --rate 200mbit", &out), 0) << out;
  out.clear();
  ASSERT_EQ(Shell("tc -n optcast-emu-sw class show dev w0", &out), 0) << out;
  EXPECT_NEAR(static_cast<double>(FirstBurst(out)), 16.0 * 9014, 16 * 90.0) << out;
  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu down", &out), 0) << out;
  out.clear();
  EXPECT_NE(Shell(optcast_ + " emu up --workers 1 --servers 1 --burst 100", &out), 0);
  EXPECT_NE(out.find("use at least the MTU + 14 (9014)"), std::string::npos) << out;
  EXPECT_EQ(EmuNamespaces(), "");
}

// Packets sent in one host count in the following host-egress class, by its "Sent ... pkt" line.
uint64_t ClassPackets(const std::string& tc_stats, const std::string& classid) {
  const size_t at = tc_stats.find("class htb " + classid + " ");
  if (at == std::string::npos) return UINT64_MAX;
  const size_t sent = tc_stats.find(" Sent ", at);
  if (sent == std::string::npos) return UINT64_MAX;
  const size_t bytes_end = tc_stats.find(" bytes ", sent);
  return std::strtoull(tc_stats.c_str() + bytes_end + 7, nullptr, 10);
}

// A host's NIC queue is fair by default: every other host gets its own class, and what a host
// sends to each destination goes through that destination's class (counted by the kernel); with
// --host-queue fifo there is one class. Datagrams need no listener, so the count is exact.
TEST_F(EmuTest, HostQueuesGiveEachDestinationItsOwnClass) {
  std::string out;
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 2 --servers 1 --rate 200mbit", &out), 0) << out;
  const std::string send =
      "ip netns exec optcast-emu-w0 python3 -c \"import socket; s = socket.socket(socket.AF_INET, "
      "socket.SOCK_DGRAM); [s.sendto(b'x' * 100, (d, 9)) for d, n in (('10.99.0.2', 7), ('10.99.0.101', 13)) "
      "for _ in range(n)]\"";
  ASSERT_EQ(Shell(send, &out), 0) << out;
  out.clear();
  ASSERT_EQ(Shell("tc -n optcast-emu-w0 -s class show dev eth0", &out), 0) << out;
  // w0's destinations in host order: w1 -> 1:3, s0 -> 1:4; 1:2 takes the rest (ARP).
  EXPECT_EQ(ClassPackets(out, "1:3"), 7u) << out;
  EXPECT_EQ(ClassPackets(out, "1:4"), 13u) << out;
  EXPECT_NE(ClassPackets(out, "1:2"), UINT64_MAX) << out;
  out.clear();
  ASSERT_EQ(Shell("tc -n optcast-emu-w0 filter show dev eth0 | grep -c 'match 0a630065/ffffffff'", &out), 0) << out;
  EXPECT_EQ(out, "1\n") << "one filter for s0's address";

  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 2 --servers 1 --rate 200mbit --host-queue fifo", &out), 0) << out;
  out.clear();
  ASSERT_EQ(Shell("tc -n optcast-emu-w0 class show dev eth0", &out), 0) << out;
  EXPECT_NE(out.find("class htb 1:1 root"), std::string::npos) << out;
  EXPECT_EQ(out.find("1:3"), std::string::npos) << "a FIFO host queue has one class, and the priority DSCP's: " << out;
  out.clear();
  EXPECT_NE(Shell(optcast_ + " emu up --workers 1 --servers 1 --host-queue drr", &out), 0);
  EXPECT_NE(out.find("--host-queue"), std::string::npos) << out;
}

// Packets marked with the priority DSCP (46 by default) take the priority class of the sending
// host's queue and of the switch port towards the receiver; the rest take their usual classes;
// with --priority-dscp off every port is one class again. Datagrams need no listener, so the
// counts are exact.
TEST_F(EmuTest, MarkedPacketsTakeThePriorityClassEverywhere) {
  std::string out;
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 1 --servers 1 --rate 200mbit", &out), 0) << out;
  const std::string send =
      "ip netns exec optcast-emu-w0 python3 -c \"import socket\n"
      "for tos, n in ((46 << 2, 11), (0, 5)):\n"
      "  s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)\n"
      "  [s.sendto(b'x' * 100, ('10.99.0.101', 9)) for _ in range(n)]\"";
  ASSERT_EQ(Shell(send + "; sleep 0.3", &out), 0) << out;  // past ARP and the queues
  out.clear();
  ASSERT_EQ(Shell("tc -n optcast-emu-w0 -s class show dev eth0", &out), 0) << out;
  EXPECT_EQ(ClassPackets(out, "1:fff0"), 11u) << out;
  EXPECT_EQ(ClassPackets(out, "1:3"), 5u) << "w0's class for s0: " << out;
  out.clear();
  ASSERT_EQ(Shell("tc -n optcast-emu-sw -s class show dev s0", &out), 0) << out;
  EXPECT_EQ(ClassPackets(out, "1:fff0"), 11u) << out;
  EXPECT_GE(ClassPackets(out, "1:2"), 5u) << "the rest, ARP included: " << out;

  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 1 --servers 1 --rate 200mbit --priority-dscp off", &out), 0) << out;
  for (const char* cmd : {"tc -n optcast-emu-sw class show dev s0", "tc -n optcast-emu-w0 class show dev eth0"}) {
    out.clear();
    ASSERT_EQ(Shell(cmd, &out), 0) << out;
    EXPECT_EQ(out.find("1:fff0"), std::string::npos) << cmd << ": " << out;
  }
  out.clear();
  EXPECT_NE(Shell(optcast_ + " emu up --workers 1 --servers 1 --priority-dscp 64", &out), 0);
  EXPECT_NE(out.find("--priority-dscp='64' is not a DSCP"), std::string::npos) << out;
}

// A host cannot send faster than its link, even to many destinations at once after being idle:
// every destination borrows from the link's class, which alone holds a burst. 8 x 32 KiB from
// one idle host at 200 Mbit/s take 10.5 ms at line rate; with the link's burst (18 KB here) and
// an offload packet (up to 64 KB) ahead of it, at least 6.9 ms. Before, the host sent it all in
// about 1 ms. A lower bound on time only: a slow machine makes it longer, never shorter.
TEST_F(EmuTest, AnIdleHostCannotBeatItsLinkRateToManyDestinations) {
  std::string out;
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 8 --servers 1 --rate 200mbit --mtu 9000 --burst 18028", &out), 0)
      << out;
  // Each receiver answers a byte for every 32 KiB.
  const std::string receiver =
      "import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
      "s.bind(('0.0.0.0', 9556)); s.listen(1); s.settimeout(20); c, _ = s.accept(); c.settimeout(20); n = 0\n"
      "while True:\n  d = c.recv(65536)\n  if not d: break\n  n += len(d)\n"
      "  while n >= 32768: n -= 32768; c.sendall(b'k')";
  std::string receivers;
  for (int w = 0; w < 8; ++w) {
    receivers += "ip netns exec optcast-emu-w" + std::to_string(w) + " python3 -c \"" + receiver + "\" & ";
  }
  // Rounds of 32 KiB to every worker at once, written as the sockets take them, 50 ms apart; the
  // median of the rounds after the first two (the connections past their start).
  const std::string sender =
      "import select, socket, time\n"
      "def connect(host):\n"
      "  deadline = time.monotonic() + 20\n"
      "  while True:\n"
      "    try: return socket.create_connection((host, 9556), timeout=20)\n"
      "    except ConnectionRefusedError:\n"
      "      if time.monotonic() > deadline: raise\n"
      "      time.sleep(0.05)\n"
      "conns = [connect('10.99.0.%d' % (i + 1)) for i in range(8)]\n"
      "[c.setblocking(False) for c in conns]; took = []\n"
      "for r in range(8):\n"
      "  time.sleep(0.05); left = {c: memoryview(b'x' * 32768) for c in conns}; acked = set(); t0 = time.monotonic()\n"
      "  while len(acked) < len(conns):\n"
      "    rd, wr, _ = select.select([c for c in conns if c not in acked], list(left), [], 5)\n"
      "    for c in wr:\n"
      "      left[c] = left[c][c.send(left[c]):]\n"
      "      if not len(left[c]): del left[c]\n"
      "    for c in rd:\n"
      "      if c.recv(1): acked.add(c)\n"
      "  took.append(time.monotonic() - t0)\n"
      "print('%.2f' % (sorted(took[2:])[len(took[2:]) // 2] * 1000))";
  out.clear();
  // A receiver may still be starting when the sender begins (Python takes a while on a busy
  // host), so the sender retries a refused connection; its exit status is the command's.
  ASSERT_EQ(
      Shell(receivers + "ip netns exec optcast-emu-s0 python3 -c \"" + sender + "\"; rc=$?; wait; exit $rc", &out), 0)
      << out;
  const double ms = std::strtod(out.c_str(), nullptr);
  std::printf("8 x 32 KiB from an idle host at 200 Mbit/s: %.2f ms (median)\n", ms);
  EXPECT_GE(ms, 6.9) << "256 KiB left one idle host faster than its 200 Mbit/s link allows: " << out;
  EXPECT_LT(ms, 5000.0) << out;
}

// A worker's link cut in the middle of a job: the rank behind it and the rank still connected
// both end with an error within the timeouts (no hang), the server survives, and teardown leaves
// nothing behind.
TEST_F(EmuTest, ACutLinkEndsInErrorsNotHangs) {
  std::string out;
  ASSERT_EQ(Shell(optcast_ + " emu up --workers 2 --servers 1 --rate 100mbit", &out), 0) << out;
  const std::string dir = std::filesystem::temp_directory_path() / ("optcast-cut-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  out.clear();
  // The server fails a job after 2 s without progress; the ranks give up after 4 s themselves.
  ASSERT_EQ(Shell("ip netns exec optcast-emu-s0 " + optcast_ +
                      " server --listen 10.99.0.101:8918 --insecure --timeout-ms 2000 --log-level info > " + dir +
                      "/server.log 2>&1 & sleep 0.5",
                  &out),
            0)
      << out;
  for (int r = 0; r < 2; ++r) {
    const std::string cmd =
        "ip netns exec optcast-emu-w" + std::to_string(r) + " " + optcast_ + " bench --rank " + std::to_string(r) +
        " --nranks 2 --rendezvous 10.99.0.1:29500 --algo server --servers 10.99.0.101:8918 "
        "--timeout-ms 4000 -b 4M -e 4M -n 100000 -w 1 > " +
        dir + "/rank" + std::to_string(r) + ".log 2>&1; echo $? > " + dir + "/rank" + std::to_string(r) + ".rc";
    out.clear();
    ASSERT_EQ(Shell("(" + cmd + ") </dev/null >/dev/null 2>&1 &", &out), 0) << out;
  }
  // Let the job run (each collective of 4 MiB takes about 0.35 s at 100 Mbit/s), then cut w1.
  sleep(3);
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(std::filesystem::exists(dir + "/rank" + std::to_string(r) + ".rc"))
        << "rank " << r << " ended before the cut";
  }
  out.clear();
  ASSERT_EQ(Shell("ip -n optcast-emu-w1 link set eth0 down", &out), 0) << out;
  const auto cut = std::chrono::steady_clock::now();
  bool both = false;
  while (std::chrono::steady_clock::now() - cut < std::chrono::seconds(20)) {
    both = std::filesystem::exists(dir + "/rank0.rc") && std::filesystem::exists(dir + "/rank1.rc");
    if (both) break;
    usleep(100000);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut).count();
  auto slurp = [&](const std::string& name) {
    std::ifstream f(dir + "/" + name);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  ASSERT_TRUE(both) << "a rank still runs 20 s after its link was cut\nrank0: " << slurp("rank0.log")
                    << "\nrank1: " << slurp("rank1.log");
  for (int r = 0; r < 2; ++r) {
    const std::string rc = slurp("rank" + std::to_string(r) + ".rc");
    EXPECT_NE(rc, "0\n") << "rank " << r
                         << " did not report the failure: " << slurp("rank" + std::to_string(r) + ".log");
  }
  // The rank still connected hears from the server why; the one cut off times out itself.
  EXPECT_NE(slurp("rank0.log").find("no progress"), std::string::npos) << slurp("rank0.log");
  std::printf("cut link: both ranks ended with errors %.1f s after the cut\n", took);
  // The server is alive and freed the job.
  out.clear();
  EXPECT_EQ(Shell("test -n \"$(ip netns pids optcast-emu-s0)\"", &out), 0)
      << "the server died: " << slurp("server.log");
  EXPECT_NE(slurp("server.log").find("failed"), std::string::npos) << slurp("server.log");
  out.clear();
  ASSERT_EQ(Shell(optcast_ + " emu down", &out), 0) << out;
  EXPECT_EQ(EmuNamespaces(), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
