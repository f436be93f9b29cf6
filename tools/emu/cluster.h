// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The emulated cluster: every host is a network namespace with one veth link to a Linux bridge
// that lives in its own namespace (optcast-emu-sw), so nothing is added to the host's network.
// Each link is rate-limited by HTB on the egress of both veth ends, which makes it full duplex
// at the set rate, like a switch port.
//
//   optcast-emu-w0  eth0 10.99.0.1   ──veth── w0 ┐
//   optcast-emu-w1  eth0 10.99.0.2   ──veth── w1 ├─ br0 in optcast-emu-sw
//   optcast-emu-s0  eth0 10.99.0.101 ──veth── s0 ┘
//
// With racks (ClusterSpec::racks > 0) each rack is a bridge in a namespace of its own
// (optcast-emu-r0, ...) holding its hosts' links, and its uplink (a veth pair, HTB at
// uplink_bits on both ends) joins the spine bridge in optcast-emu-sw:
//
//   w0..w3 ── br0 in optcast-emu-r0 ──up══r0── br0 in optcast-emu-sw ──r1══up── br0 in optcast-emu-r1 ── w4..w7

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/bit_rate.h"
#include "optcast/status.h"
#include "tools/emu/host_queue.h"

namespace optcast::tools::emu {

inline constexpr char kNamespacePrefix[] = "optcast-emu-";
inline constexpr char kSwitchNamespace[] = "optcast-emu-sw";
inline constexpr int kMaxWorkers = 100;
inline constexpr int kMaxServers = 100;

struct ClusterSpec {
  int workers = 2;
  int servers = 1;
  uint64_t rate_bits = 500'000'000;  // per link and direction, bit/s
  // Jumbo frames, as on the fabrics training clusters use (EFA 8900+, RoCE/IB 4096): at 1500 the
  // Ethernet, IP and TCP headers alone take 4.4% of every link from every algorithm.
  int mtu = 9000;
  // TCP congestion control of every host (bbr, cubic, reno: net.ipv4.tcp_congestion_control in
  // each host's namespace); empty keeps the machine's default.
  std::string tcp_cc;
  // Packets each switch port queues towards its host before it drops (a FIFO under the port's
  // rate limit); 0 keeps the device default (txqueuelen, 1000).
  int queue_packets = 0;
  // HTB burst of every shaped link, bytes (0: HtbBurstBytes, 1 ms at line rate, at least 16
  // frames): how much a link that was idle may send at once, faster than its rate.
  uint64_t burst_bytes = 0;
  // What each host's NIC queue does with several destinations (host_queue.h): per-destination
  // round robin, as a Linux host's default fq_codel does, or one FIFO.
  HostQueue host_queue = HostQueue::kFair;
  // The DSCP that switch ports and host queues serve first (host_queue.h); 0: none. Optcast
  // marks latency-bound collectives with 46 by default.
  int priority_dscp = 46;
  // Racks of workers (0: every host on one switch). Workers fill them in order, workers / racks
  // each. Each rack's switch reaches the spine through an uplink of uplink_bits each way.
  int racks = 0;
  uint64_t uplink_bits = 0;
  // The rack of each server (a tree's leaves and roots, tree_layout.h). Empty: flat servers fill
  // racks of their own, workers / racks per rack, behind the same uplinks (as optcast-sim does).
  std::vector<int> server_rack;

  int RackSize() const { return racks > 0 ? workers / racks : 0; }
  // Worker racks plus the flat servers' own racks.
  int TotalRacks() const;
};

inline constexpr int kMaxRacks = 16;

// The congestion controls --tcp-cc accepts.
inline constexpr const char* kTcpCongestionControls[] = {"bbr", "cubic", "reno"};
// An error unless `cc` is one of them and this kernel offers it.
Status CheckTcpCongestionControl(const std::string& cc);
// "bbr, MTU 1500, queues of 100 packets": the parts of the spec a reader needs to rerun it.
std::string DescribeNetwork(const ClusterSpec& spec);

enum class Role { kWorker, kServer };

struct Host {
  Role role;
  int index;
  std::string name;     // short: w0, s3 (also the veth name on the switch side)
  std::string netns;    // optcast-emu-w0
  std::string address;  // 10.99.0.1
};

// Workers get 10.99.0.1..100, servers 10.99.0.101..200.
Host WorkerHost(int i);
Host ServerHost(int j);
std::vector<Host> Hosts(const ClusterSpec& spec);
// The rack a host sits in; -1 without racks.
int RackOf(const ClusterSpec& spec, const Host& h);
// optcast-emu-r3
std::string RackNamespace(int rack);
// An error naming the fix unless the racks and uplink of `spec` make sense.
Status CheckRacks(const ClusterSpec& spec);
// The links' burst: 0 (the default) or at least one whole frame.
Status CheckBurst(const ClusterSpec& spec);

// Root (and ip/tc present)? If not, an error that says how to run it.
Status CheckPrivileges();

// Removes any earlier cluster, then builds this one.
Status Up(const ClusterSpec& spec, bool verbose);
// Kills the processes inside every optcast-emu-* namespace and deletes the namespaces (and with
// them the veths and the bridge). Idempotent; works after a crash.
Status Down(bool verbose);
// The optcast-emu-* namespaces that exist now.
Status ListNamespaces(std::vector<std::string>* names);
// A human description of the current cluster (hosts, addresses, rates, processes).
Status Describe(std::string* text);

}  // namespace optcast::tools::emu
