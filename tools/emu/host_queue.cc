// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/emu/host_queue.h"

#include <algorithm>
#include <cstdio>

namespace optcast::tools::emu {

std::optional<HostQueue> ParseHostQueue(const std::string& text) {
  if (text == "fair") return HostQueue::kFair;
  if (text == "fifo") return HostQueue::kFifo;
  return std::nullopt;
}

const char* HostQueueName(HostQueue q) { return q == HostQueue::kFair ? "fair" : "fifo"; }

uint64_t HtbBurstBytes(uint64_t rate_bits, int mtu) {
  return std::max<uint64_t>(rate_bits / 8 / 1000, 16 * static_cast<uint64_t>(mtu + 14));
}

std::vector<std::vector<std::string>> HostEgressCommands(const std::string& dev, uint64_t rate_bits, int mtu,
                                                         HostQueue queue, const std::vector<std::string>& destinations,
                                                         uint64_t burst_bytes) {
  const std::string burst = std::to_string(burst_bytes > 0 ? burst_bytes : HtbBurstBytes(rate_bits, mtu));
  const std::string rate = std::to_string(rate_bits) + "bit";
  // The default quantum (rate / r2q) overflows at these rates and makes the kernel warn.
  auto htb_class = [&](const std::string& parent, const std::string& id, const std::string& guaranteed,
                       const std::string& quantum, const std::string& class_burst) {
    return std::vector<std::string>{"class",     "add",    "dev",       dev,        "parent", parent, "classid",
                                    id,          "htb",    "rate",      guaranteed, "ceil",   rate,   "burst",
                                    class_burst, "cburst", class_burst, "quantum",  quantum};
  };
  std::vector<std::vector<std::string>> cmds;
  if (queue == HostQueue::kFifo) {
    // One class: rate == ceil, and its queue is the device's FIFO.
    cmds.push_back({"qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"});
    cmds.push_back(htb_class("1:", "1:1", rate, "60000", burst));
    return cmds;
  }
  cmds.push_back({"qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "2"});
  cmds.push_back(htb_class("1:", "1:1", rate, "60000", burst));
  // Every destination borrows the link from the link's class, one frame's worth of credit per
  // turn (HTB's deficit round robin), so a destination with a few frames waits for about a frame
  // of each busy destination, and only the link's class holds a burst. A class with a guaranteed
  // share would send within that share without asking the link's class: with one per
  // destination, an idle host could send a burst to every destination at once, many times what
  // its link allows (docs/emulated-cluster.md, "Hosts cannot beat the line rate"). Packets are
  // sent whole, segmentation-offload packets included, as a NIC sends them at line rate.
  const std::string own_rate = "8kbit";  // HTB's smallest rate: nothing of its own
  const std::string frame = std::to_string(mtu + 14);
  cmds.push_back(htb_class("1:1", "1:2", own_rate, frame, frame));
  int minor = 3;
  for (const std::string& addr : destinations) {
    char id[16];
    std::snprintf(id, sizeof(id), "1:%x", minor++);
    cmds.push_back(htb_class("1:1", id, own_rate, frame, frame));
    cmds.push_back({"filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip",
                    "dst", addr + "/32", "flowid", id});
  }
  return cmds;
}

}  // namespace optcast::tools::emu
