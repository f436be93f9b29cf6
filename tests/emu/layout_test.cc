// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Where the emulated cluster puts its hosts (racks, trees) and the algbw bounds it prints, against
// closed forms worked out by hand. Needs no root: nothing is built.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tools/emu/cluster.h"
#include "tools/emu/host_queue.h"
#include "tools/emu/link_bound.h"
#include "tools/emu/tree_layout.h"

namespace optcast::tools::emu {
namespace {

ClusterSpec Spec(int workers, int servers, uint64_t rate_bits, int racks = 0, uint64_t uplink_bits = 0) {
  ClusterSpec s;
  s.workers = workers;
  s.servers = servers;
  s.rate_bits = rate_bits;
  s.racks = racks;
  s.uplink_bits = uplink_bits;
  return s;
}

constexpr double kRate = 200e6 / 8;  // bytes/s of a 200mbit link

TEST(RackLayout, OneSwitchGivesTheTextbookBounds) {
  for (auto [w, s] : {std::pair{4, 4}, {8, 8}, {8, 4}, {8, 1}}) {
    const ClusterSpec spec = Spec(w, s, 200'000'000);
    EXPECT_NEAR(BoundOf(FlatServerFlows(w, s), spec).algbw_Bps, kRate * std::min(1.0, double(s) / w), 1e-6)
        << w << " workers, " << s << " servers";
    EXPECT_NEAR(BoundOf(RingFlows(w), spec).algbw_Bps, kRate * w / (2.0 * (w - 1)), 1e-6) << w << " workers";
  }
}

TEST(RackLayout, OneSwitchTreesAreBoundByTheBusiestServer) {
  TreeLayout t;
  // Depth 2: a root and 2 leaves of 2 workers each; a leaf moves 2 workers' buffers and its own.
  ASSERT_TRUE(TreeLayout::Make(3, 4, 2, &t).ok());
  EXPECT_EQ(t.worker_servers, (std::vector<std::vector<int>>{{1}, {2}, {1}, {2}}));
  EXPECT_NEAR(BoundOf(TreeFlows(t, 4), Spec(4, 3, 200'000'000)).algbw_Bps, kRate / 3, 1e-6);
  // Depth 3: root, 2 inner servers with a leaf each, 2 workers per leaf.
  ASSERT_TRUE(TreeLayout::Make(5, 4, 3, &t).ok());
  EXPECT_EQ(t.parent, (std::vector<int>{-1, 0, 0, 1, 2}));
  EXPECT_NEAR(BoundOf(TreeFlows(t, 4), Spec(4, 5, 200'000'000)).algbw_Bps, kRate / 3, 1e-6);
}

TEST(RackLayout, FlatServersFillRacksOfTheirOwnBehindTheUplinks) {
  // 2 racks of 2 workers; 2 servers in rack 2. 400mbit links, 100mbit uplinks: the server rack's
  // uplink carries all 4 workers' buffers.
  const ClusterSpec spec = Spec(4, 2, 400'000'000, 2, 100'000'000);
  ASSERT_TRUE(CheckRacks(spec).ok());
  EXPECT_EQ(spec.TotalRacks(), 3);
  EXPECT_EQ(RackOf(spec, WorkerHost(1)), 0);
  EXPECT_EQ(RackOf(spec, WorkerHost(2)), 1);
  EXPECT_EQ(RackOf(spec, ServerHost(0)), 2);
  EXPECT_EQ(RackOf(spec, ServerHost(1)), 2);
  const LinkBound flat = BoundOf(FlatServerFlows(4, 2), spec);
  EXPECT_NEAR(flat.algbw_Bps, 100e6 / 8 / 4, 1e-6);
  EXPECT_EQ(flat.busiest, "rack 2's uplink");
  // The ring crosses each worker rack's uplink once each way: 1.5 buffers through 100mbit.
  EXPECT_NEAR(BoundOf(RingFlows(4), spec).algbw_Bps, 100e6 / 8 / 1.5, 1e-6);
  // 8 workers, 8 servers, 4:1 at 200mbit: each uplink carries 4 buffers through one link's rate.
  const ClusterSpec four = Spec(8, 8, 200'000'000, 2, 200'000'000);
  EXPECT_EQ(four.TotalRacks(), 4);
  EXPECT_NEAR(BoundOf(FlatServerFlows(8, 8), four).algbw_Bps, kRate / 4, 1e-6);
  EXPECT_NEAR(BoundOf(RingFlows(8), four).algbw_Bps, kRate * 8 / 14.0, 1e-6);
}

TEST(RackLayout, TreesOverRacksSpreadTheirRootsAndListTheirRacksLeaves) {
  // 8 workers in 2 racks, 2 trees: roots 0 and 1 in racks 0 and 1, leaves 2,3 in rack 0, 4,5 in 1.
  TreeLayout t;
  ASSERT_TRUE(TreeLayout::MakeRacked(6, 8, 2, &t).ok());
  EXPECT_EQ(t.parent, (std::vector<int>{-1, -1, 0, 1, 0, 1}));
  EXPECT_EQ(t.server_rack, (std::vector<int>{0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(t.worker_servers[0], (std::vector<int>{2, 3}));
  EXPECT_EQ(t.worker_servers[7], (std::vector<int>{4, 5}));
  ClusterSpec spec = Spec(8, 6, 200'000'000, 2, 200'000'000);
  spec.server_rack = t.server_rack;
  EXPECT_EQ(spec.TotalRacks(), 2);
  // A leaf takes 4 workers' halves and the root's half: 2.5 buffers each way. An uplink carries
  // one partial and one result of the tree rooted in the other rack: 1 buffer, not binding.
  const LinkBound tree = BoundOf(TreeFlows(t, 8), spec);
  EXPECT_NEAR(tree.algbw_Bps, kRate / 2.5, 1e-6);
  EXPECT_NE(tree.busiest.find("'s link"), std::string::npos) << tree.busiest;
  // The same trees with an uplink of a tenth of a link: then the uplink binds (1 buffer at R/10).
  spec.uplink_bits = 20'000'000;
  EXPECT_NEAR(BoundOf(TreeFlows(t, 8), spec).algbw_Bps, kRate / 10, 1e-6);
}

TEST(RackLayout, BadRacksAreRefusedWithTheFix) {
  TreeLayout t;
  Status st = TreeLayout::MakeRacked(5, 8, 2, &t);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("multiple of 3"), std::string::npos) << st.message();
  st = CheckRacks(Spec(6, 1, 200'000'000, 4, 100'000'000));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("must divide --workers"), std::string::npos) << st.message();
  st = CheckRacks(Spec(4, 1, 200'000'000, 0, 100'000'000));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--uplink needs --racks"), std::string::npos) << st.message();
  st = CheckRacks(Spec(4, 64, 200'000'000, 2, 100'000'000));  // 32 server racks of 2
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("at most 16 racks"), std::string::npos) << st.message();
}

// The burst and cburst of the HTB classes a link gets, the link's own class (1:1) and the
// per-destination classes under it apart.
struct ClassBursts {
  std::vector<std::string> link, per_destination;
};
ClassBursts Bursts(const std::vector<std::vector<std::string>>& cmds) {
  ClassBursts out;
  for (const auto& cmd : cmds) {
    bool link = false;
    for (size_t i = 0; i + 1 < cmd.size(); ++i) {
      if (cmd[i] == "classid") link = cmd[i + 1] == "1:1";
    }
    for (size_t i = 0; i + 1 < cmd.size(); ++i) {
      if (cmd[i] == "burst" || cmd[i] == "cburst") (link ? out.link : out.per_destination).push_back(cmd[i + 1]);
    }
  }
  return out;
}

// The link's class: by default 1 ms at line rate or 16 frames, whichever is more; --burst sets
// it, fair or FIFO.
TEST(HostQueue, BurstIsOneMillisecondOrSixteenFramesUnlessSet) {
  EXPECT_EQ(HtbBurstBytes(500'000'000, 1500), 62'500u);     // 1 ms at 500 Mbit/s
  EXPECT_EQ(HtbBurstBytes(200'000'000, 9000), 16u * 9014);  // 16 jumbo frames: 5.8 ms at 200 Mbit/s
  const std::vector<std::string> dests = {"10.99.0.2", "10.99.0.101"};
  for (HostQueue q : {HostQueue::kFair, HostQueue::kFifo}) {
    const auto by_default = Bursts(HostEgressCommands("eth0", 200'000'000, 9000, q, dests));
    ASSERT_EQ(by_default.link.size(), 2u) << HostQueueName(q);
    for (const std::string& b : by_default.link) EXPECT_EQ(b, std::to_string(16 * 9014)) << HostQueueName(q);
    const auto set = Bursts(HostEgressCommands("eth0", 200'000'000, 9000, q, dests, 18028));
    ASSERT_EQ(set.link.size(), 2u) << HostQueueName(q);
    for (const std::string& b : set.link) EXPECT_EQ(b, "18028") << HostQueueName(q);
  }
}

// A destination's class within a rate of its own would send without the link's class having
// credit: so they have none (HTB's smallest rate) and one frame of burst, whatever the link's,
// and borrow the link from its class, which alone holds the burst.
TEST(HostQueue, DestinationsBorrowTheLinkAndHoldNoBurstOfTheirOwn) {
  const std::vector<std::string> dests = {"10.99.0.2", "10.99.0.3", "10.99.0.101"};
  for (uint64_t burst : {uint64_t{0}, uint64_t{18028}, uint64_t{1} << 20}) {
    const auto b = Bursts(HostEgressCommands("eth0", 200'000'000, 9000, HostQueue::kFair, dests, burst));
    ASSERT_EQ(b.per_destination.size(), 2 * (dests.size() + 1)) << burst;  // burst and cburst; and the default class
    for (const std::string& v : b.per_destination) EXPECT_EQ(v, "9014") << burst;
    for (const auto& cmd : HostEgressCommands("eth0", 200'000'000, 9000, HostQueue::kFair, dests, burst)) {
      for (size_t i = 0; i + 1 < cmd.size(); ++i) {
        if (cmd[i] == "parent" && cmd[i + 1] == "1:1" && cmd[0] == "class") {
          EXPECT_EQ(cmd[std::find(cmd.begin(), cmd.end(), "rate") - cmd.begin() + 1], "8kbit");
          EXPECT_EQ(cmd[std::find(cmd.begin(), cmd.end(), "ceil") - cmd.begin() + 1], "200000000bit");
        }
      }
    }
  }
  EXPECT_TRUE(Bursts(HostEgressCommands("eth0", 200'000'000, 9000, HostQueue::kFifo, dests)).per_destination.empty());
}

// The value after `key` in a tc argument list, or "".
std::string ValueOf(const std::vector<std::string>& cmd, const std::string& key) {
  auto it = std::find(cmd.begin(), cmd.end(), key);
  return it == cmd.end() || it + 1 == cmd.end() ? "" : *(it + 1);
}

// A priority DSCP gets a class of the whole link's rate and burst (it sends ahead of the rest
// even while the link's class pays off an offload packet), found by the first filter; every other
// class is served after it; and a port's two classes each get a FIFO of --queue-packets.
TEST(HostQueue, APriorityDscpIsServedFirstOnPortsAndHosts) {
  const std::vector<std::string> dests = {"10.99.0.2", "10.99.0.101"};
  const auto port = PortEgressCommands("s0", 500'000'000, 1500, 100, 0, 46);
  const auto host = HostEgressCommands("eth0", 500'000'000, 1500, HostQueue::kFair, dests, 0, 46);
  const auto fifo_host = HostEgressCommands("eth0", 500'000'000, 1500, HostQueue::kFifo, dests, 0, 46);
  for (const auto* cmds : {&port, &host, &fifo_host}) {
    int priority_classes = 0, dscp_filters = 0;
    for (const auto& cmd : *cmds) {
      if (cmd[0] == "class" && ValueOf(cmd, "parent") == "1:1") {
        if (ValueOf(cmd, "classid") == kPriorityClass) {
          ++priority_classes;
          EXPECT_EQ(ValueOf(cmd, "rate"), "500000000bit");
          EXPECT_EQ(ValueOf(cmd, "burst"), std::to_string(HtbBurstBytes(500'000'000, 1500)));
          EXPECT_EQ(ValueOf(cmd, "prio"), "0");
        } else {
          EXPECT_EQ(ValueOf(cmd, "rate"), "8kbit");
          EXPECT_EQ(ValueOf(cmd, "prio"), "1");
        }
      }
      if (cmd[0] == "filter") {
        if (ValueOf(cmd, "dsfield") == "0xb8") {
          ++dscp_filters;
          EXPECT_EQ(ValueOf(cmd, "0xb8"), "0xfc");  // the DSCP bits, not ECN's
          EXPECT_EQ(ValueOf(cmd, "flowid"), kPriorityClass);
          EXPECT_EQ(ValueOf(cmd, "prio"), "1");
        } else {
          EXPECT_EQ(ValueOf(cmd, "prio"), "2") << "after the DSCP's filter";
        }
      }
    }
    EXPECT_EQ(priority_classes, 1);
    EXPECT_EQ(dscp_filters, 1);
  }
  int fifos = 0;
  for (const auto& cmd : port) {
    if (cmd[0] == "qdisc" && ValueOf(cmd, "pfifo") == "limit") {
      ++fifos;
      EXPECT_EQ(ValueOf(cmd, "limit"), "100");
    }
  }
  EXPECT_EQ(fifos, 2);
  // The port's other class holds the link's burst, as the one class of a port without priority.
  for (const auto& cmd : port) {
    if (cmd[0] == "class" && ValueOf(cmd, "classid") == "1:2") {
      EXPECT_EQ(ValueOf(cmd, "cburst"), std::to_string(HtbBurstBytes(500'000'000, 1500)));
    }
  }
}

TEST(HostQueue, WithoutAPriorityDscpAPortIsOneClassOverOneFifo) {
  const auto port = PortEgressCommands("s0", 500'000'000, 1500, 100, 0, 0);
  ASSERT_EQ(port.size(), 3u);
  EXPECT_EQ(ValueOf(port[0], "default"), "1");
  EXPECT_EQ(ValueOf(port[1], "classid"), "1:1");
  EXPECT_EQ(ValueOf(port[2], "parent"), "1:1");
  EXPECT_EQ(ValueOf(port[2], "limit"), "100");
  EXPECT_EQ(PortEgressCommands("s0", 500'000'000, 1500, 0, 0, 0).size(), 2u) << "the device's own FIFO";
}

TEST(HostQueue, ABurstSmallerThanAFrameIsRefusedWithTheFix) {
  ClusterSpec spec;
  spec.workers = 2;
  spec.servers = 1;
  spec.mtu = 9000;
  spec.burst_bytes = 9013;
  const Status st = CheckBurst(spec);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("at least the MTU + 14 (9014)"), std::string::npos) << st.message();
  spec.burst_bytes = 9014;
  EXPECT_TRUE(CheckBurst(spec).ok());
  spec.burst_bytes = 0;
  EXPECT_TRUE(CheckBurst(spec).ok());
}

}  // namespace
}  // namespace optcast::tools::emu
