// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/emu/link_bound.h"

#include <algorithm>
#include <map>

namespace optcast::tools::emu {

std::vector<Flow> RingFlows(int workers) {
  std::vector<Flow> flows;
  const double share = 2.0 * (workers - 1) / workers;
  for (int i = 0; i < workers; ++i) flows.push_back({i, (i + 1) % workers, share});
  return flows;
}

std::vector<Flow> FlatServerFlows(int workers, int servers) {
  std::vector<Flow> flows;
  for (int i = 0; i < workers; ++i) {
    for (int j = 0; j < servers; ++j) {
      flows.push_back({i, workers + j, 1.0 / servers});
      flows.push_back({workers + j, i, 1.0 / servers});
    }
  }
  return flows;
}

std::vector<Flow> TreeFlows(const TreeLayout& tree, int workers) {
  std::vector<Flow> flows;
  std::vector<double> carried(tree.parent.size(), 0.0);  // share of the buffer each server reduces
  for (int i = 0; i < workers; ++i) {
    const auto& leaves = tree.worker_servers[i];
    for (int s : leaves) {
      const double share = 1.0 / static_cast<double>(leaves.size());
      flows.push_back({i, workers + s, share});
      flows.push_back({workers + s, i, share});
      carried[s] = std::max(carried[s], share);
    }
  }
  // A server forwards one partial of what it carries; parents come before children in no fixed
  // order, so pass the shares up level by level (depth is at most a few).
  for (size_t pass = 0; pass < tree.parent.size(); ++pass) {
    for (size_t s = 0; s < tree.parent.size(); ++s) {
      if (tree.parent[s] >= 0) carried[tree.parent[s]] = std::max(carried[tree.parent[s]], carried[s]);
    }
  }
  for (size_t s = 0; s < tree.parent.size(); ++s) {
    if (tree.parent[s] < 0) continue;
    flows.push_back({workers + static_cast<int>(s), workers + tree.parent[s], carried[s]});
    flows.push_back({workers + tree.parent[s], workers + static_cast<int>(s), carried[s]});
  }
  return flows;
}

LinkBound BoundOf(const std::vector<Flow>& flows, const ClusterSpec& spec) {
  const std::vector<Host> hosts = Hosts(spec);
  std::map<int, double> out, in, up, down;  // by host, and by rack
  for (const Flow& f : flows) {
    out[f.from] += f.share;
    in[f.to] += f.share;
    const int a = RackOf(spec, hosts[f.from]);
    const int b = RackOf(spec, hosts[f.to]);
    if (a != b) {
      up[a] += f.share;
      down[b] += f.share;
    }
  }
  const double rate = static_cast<double>(spec.rate_bits) / 8.0;
  const double uplink = static_cast<double>(spec.uplink_bits) / 8.0;
  LinkBound best{rate, "no link"};
  double worst = 0;  // seconds per byte of buffer on the busiest link
  for (size_t h = 0; h < hosts.size(); ++h) {
    const double load = std::max(out[static_cast<int>(h)], in[static_cast<int>(h)]) / rate;
    if (load > worst) {
      worst = load;
      best.busiest = hosts[h].name + "'s link";
    }
  }
  for (int k = 0; k < spec.TotalRacks(); ++k) {
    const double load = std::max(up[k], down[k]) / uplink;
    if (load > worst * (1 + 1e-9)) {
      worst = load;
      best.busiest = "rack " + std::to_string(k) + "'s uplink";
    }
  }
  if (worst > 0) best.algbw_Bps = 1.0 / worst;
  return best;
}

}  // namespace optcast::tools::emu
