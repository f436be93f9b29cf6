// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The queue in front of each emulated host's NIC. Linux hosts schedule their egress per flow
// (Debian, Ubuntu and RHEL default to fq_codel; fq is the usual choice with BBR), so a short
// message leaves a host without waiting behind the bulk transfers that host is also sending. A
// single FIFO there would add the whole host queue to every small message, which no real host
// does. This kernel's emulation may lack fq and fq_codel, so "fair" is built from what every
// kernel has: HTB classes, one per destination host, served round robin one frame of credit at
// a time, each borrowing the whole link from the link's class (host_queue.cc says why they have
// no share of their own). Switch ports stay single FIFOs, as in commodity switches.
//
// Both may give one DSCP strict priority, as datacentre switches and hosts that honour DSCP do
// (a switch's priority queue; a host's prio qdisc with a DSCP filter, or fq_codel serving flows
// with little queued first): a priority class with the whole link as a rate of its own, so that it sends ahead of
// every other class, even while the link's class is paying off a 64 KB offload packet, which a
// real port would be sending as 1500-byte frames between which a priority frame goes. Its sends
// are charged to the link's class, so the others wait for them, and a port still cannot beat its
// line rate over time. Optcast marks the chunks and results of latency-bound collectives so
// (transport/posix/traffic_class.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace optcast::tools::emu {

enum class HostQueue { kFair, kFifo };

// "fair" or "fifo"; nullopt otherwise.
std::optional<HostQueue> ParseHostQueue(const std::string& text);
const char* HostQueueName(HostQueue q);

// The tc commands (argument lists without "tc" and the namespace) that rate-limit `dev` to
// `rate_bits` with the chosen queue. `destinations` are the addresses of the other hosts; "fair"
// gives each its own class, anything else (ARP, unknown addresses) shares one more.
// `burst_bytes` is HTB's burst and cburst (0: HtbBurstBytes).
// `priority_dscp` > 0 gives that DSCP strict priority.
std::vector<std::vector<std::string>> HostEgressCommands(const std::string& dev, uint64_t rate_bits, int mtu,
                                                         HostQueue queue, const std::vector<std::string>& destinations,
                                                         uint64_t burst_bytes = 0, int priority_dscp = 0);

// A switch port's egress: one FIFO (queue_packets long; 0: the device's) at `rate_bits`, or with
// `priority_dscp` > 0 a FIFO of that length for that DSCP served first and one for the rest.
std::vector<std::vector<std::string>> PortEgressCommands(const std::string& dev, uint64_t rate_bits, int mtu,
                                                         int queue_packets, uint64_t burst_bytes = 0,
                                                         int priority_dscp = 0);

// The class a priority DSCP's packets go to in either queue.
inline constexpr char kPriorityClass[] = "1:fff0";

// HTB's default burst for a link of this rate: one millisecond at line rate (at least 16 full-size
// frames), so that timer slack does not eat into the rate. A link idle for a while may then send
// that much at once, faster than its rate: a real port cannot (docs/emulated-cluster.md, "Burst").
uint64_t HtbBurstBytes(uint64_t rate_bits, int mtu);

}  // namespace optcast::tools::emu
