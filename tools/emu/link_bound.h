// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The algbw bound of an algorithm on the emulated cluster, from the traffic it makes: in one
// AllReduce of S bytes every host link and every rack uplink carries some multiple of S each
// way, and the busiest link, at its rate, takes at least that long. On one switch this is the
// familiar R·min(1, S/W) of flat servers and R·W/(2(W-1)) of a ring; with racks an uplink can
// be the busiest (flat servers in racks of their own behind a 4:1 uplink: a quarter of R).

#include <string>
#include <vector>

#include "tools/emu/cluster.h"
#include "tools/emu/tree_layout.h"

namespace optcast::tools::emu {

// `share` of the buffer goes from host `from` to host `to`; hosts are numbered workers first
// (worker i is i), then servers (server j is workers + j).
struct Flow {
  int from = 0;
  int to = 0;
  double share = 0;
};

// A ring in rank order: each worker sends 2(W-1)/W of the buffer to the next.
std::vector<Flow> RingFlows(int workers);
// Every worker sends 1/S of the buffer to every server and gets 1/S back from each.
std::vector<Flow> FlatServerFlows(int workers, int servers);
// Workers send 1/L to each of their L leaves and get it back; every server sends its parent one
// partial per stripe it carries and gets the result back.
std::vector<Flow> TreeFlows(const TreeLayout& tree, int workers);

struct LinkBound {
  double algbw_Bps = 0;  // bytes of buffer per second
  std::string busiest;   // "w0's link", "rack 2's uplink"
};

// The link that carries the most (relative to its rate) and the algbw it allows.
LinkBound BoundOf(const std::vector<Flow>& flows, const ClusterSpec& spec);

}  // namespace optcast::tools::emu
