// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The simulated network: a two-level fat tree (leaf switches joined by a non-blocking spine) built
// as SimGrid star zones. Each host has one full-duplex link to its leaf switch; each leaf switch
// one full-duplex uplink of rack_size * link / oversub. Workers fill racks of rack_size; flat
// servers fill racks of their own; tree leaf servers sit in their workers' rack, tree roots where
// SimConfig::root_placement puts them. Traffic between two hosts of one rack stays below the leaf
// switch; traffic between racks crosses both racks' uplinks.

#include <simgrid/s4u.hpp>
#include <vector>

#include "sim/sim_config.h"

namespace optcast::sim {

struct Fabric {
  std::vector<simgrid::s4u::Host*> workers;  // rank order; racks filled in order (the simulated ones)
  std::vector<int> worker_rack;              // rack of each worker
  int worker_racks = 0;
  std::vector<std::vector<simgrid::s4u::Host*>> leaf_servers;  // tree: per worker rack
  std::vector<simgrid::s4u::Host*> servers;                    // flat servers, or tree roots
  double uplink_bps = 0;                                       // per leaf switch, each way
  simgrid::s4u::Host* timer = nullptr;                         // executions on it are pure delays
};

// Builds the platform into `engine` (once per process).
Fabric BuildFabric(simgrid::s4u::Engine& engine, const SimConfig& c);

}  // namespace optcast::sim
