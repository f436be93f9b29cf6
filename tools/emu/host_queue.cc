// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/emu/host_queue.h"

#include <algorithm>
#include <cstdio>
#include <utility>

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

namespace {

// The tc argument lists for one device, built up in order.
class Commands {
 public:
  Commands(std::string dev, uint64_t rate_bits, int mtu, uint64_t burst_bytes)
      : dev_(std::move(dev)),
        rate_(std::to_string(rate_bits) + "bit"),
        frame_(std::to_string(mtu + 14)),
        burst_(std::to_string(burst_bytes > 0 ? burst_bytes : HtbBurstBytes(rate_bits, mtu))) {}

  void Root(const std::string& default_minor) {
    cmds_.push_back({"qdisc", "replace", "dev", dev_, "root", "handle", "1:", "htb", "default", default_minor});
    Class("1:", "1:1", rate_, "60000", burst_, "");
  }
  // A class that borrows the whole link from 1:1, one frame of credit per turn, nothing of its own.
  void Borrower(const std::string& id, const std::string& prio) { Class("1:1", id, "8kbit", frame_, frame_, prio); }
  // A port's one class below the priority class: it borrows the link with the link's burst, so
  // that a port without marked traffic sends as the single class of a port without priority does.
  void Rest(const std::string& id) { Class("1:1", id, "8kbit", frame_, burst_, "1"); }
  // The priority class: the whole link of its own, and the link's burst.
  void Priority() { Class("1:1", kPriorityClass, rate_, frame_, burst_, "0"); }
  void Filter(const std::string& pref, const std::vector<std::string>& match, const std::string& flowid) {
    std::vector<std::string> cmd = {
        "filter", "add", "dev", dev_, "parent", "1:", "protocol", "ip", "prio", pref, "u32"};
    cmd.insert(cmd.end(), match.begin(), match.end());
    cmd.insert(cmd.end(), {"flowid", flowid});
    cmds_.push_back(std::move(cmd));
  }
  void DscpFilter(int dscp) {
    char tos[8];
    std::snprintf(tos, sizeof(tos), "0x%02x", dscp << 2);
    Filter("1", {"match", "ip", "dsfield", tos, "0xfc"}, kPriorityClass);
  }
  void Fifo(const std::string& parent, const std::string& handle, int packets) {
    cmds_.push_back(
        {"qdisc", "add", "dev", dev_, "parent", parent, "handle", handle, "pfifo", "limit", std::to_string(packets)});
  }
  std::vector<std::vector<std::string>> Take() { return std::move(cmds_); }

 private:
  // The default quantum (rate / r2q) overflows at these rates and makes the kernel warn.
  void Class(const std::string& parent, const std::string& id, const std::string& guaranteed,
             const std::string& quantum, const std::string& class_burst, const std::string& prio) {
    std::vector<std::string> cmd = {"class",     "add",    "dev",       dev_,       "parent", parent, "classid",
                                    id,          "htb",    "rate",      guaranteed, "ceil",   rate_,  "burst",
                                    class_burst, "cburst", class_burst, "quantum",  quantum};
    if (!prio.empty()) cmd.insert(cmd.end(), {"prio", prio});
    cmds_.push_back(std::move(cmd));
  }

  std::string dev_, rate_;
  std::string frame_, burst_;
  std::vector<std::vector<std::string>> cmds_;
};

}  // namespace

std::vector<std::vector<std::string>> HostEgressCommands(const std::string& dev, uint64_t rate_bits, int mtu,
                                                         HostQueue queue, const std::vector<std::string>& destinations,
                                                         uint64_t burst_bytes, int priority_dscp) {
  if (queue == HostQueue::kFifo) return PortEgressCommands(dev, rate_bits, mtu, 0, burst_bytes, priority_dscp);
  Commands c(dev, rate_bits, mtu, burst_bytes);
  c.Root("2");
  // Every destination borrows the link from the link's class, one frame's worth of credit per
  // turn (HTB's deficit round robin), so a destination with a few frames waits for about a frame
  // of each busy destination, and only the link's class holds a burst. A class with a guaranteed
  // share would send within that share without asking the link's class: with one per
  // destination, an idle host could send a burst to every destination at once, many times what
  // its link allows (docs/emulated-cluster.md, "Hosts cannot beat the line rate"). Packets are
  // sent whole, segmentation-offload packets included, as a NIC sends them at line rate.
  const bool priority = priority_dscp > 0;
  const std::string prio = priority ? "1" : "";
  c.Borrower("1:2", prio);
  if (priority) {
    c.Priority();
    c.DscpFilter(priority_dscp);
  }
  int minor = 3;
  for (const std::string& addr : destinations) {
    char id[16];
    std::snprintf(id, sizeof(id), "1:%x", minor++);
    c.Borrower(id, prio);
    c.Filter(priority ? "2" : "1", {"match", "ip", "dst", addr + "/32"}, id);
  }
  return c.Take();
}

std::vector<std::vector<std::string>> PortEgressCommands(const std::string& dev, uint64_t rate_bits, int mtu,
                                                         int queue_packets, uint64_t burst_bytes, int priority_dscp) {
  Commands c(dev, rate_bits, mtu, burst_bytes);
  if (priority_dscp <= 0) {
    // One class: rate == ceil, and its queue is the device's FIFO or one of queue_packets.
    c.Root("1");
    if (queue_packets > 0) c.Fifo("1:1", "10:", queue_packets);
    return c.Take();
  }
  c.Root("2");
  c.Rest("1:2");
  c.Priority();
  c.DscpFilter(priority_dscp);
  if (queue_packets > 0) {
    c.Fifo("1:2", "20:", queue_packets);
    c.Fifo(kPriorityClass, "30:", queue_packets);
  }
  return c.Take();
}

}  // namespace optcast::tools::emu
