// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The algorithms as host actors on a Fabric. Each Spawn* creates the actors; Engine::run() plays
// them; the returned finish times (one per worker) are filled in as workers complete.

#include <memory>
#include <vector>

#include "sim/fabric.h"
#include "sim/node.h"
#include "sim/sim_config.h"

namespace optcast::sim {

struct Run {
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<double> worker_done_s;  // when each worker had its whole result
  uint64_t chunk_bytes = 0;           // chunk size used (server paths)
  int stripes = 0;                    // servers a worker stripes over (server paths)
  std::shared_ptr<const void> keep;   // state the nodes refer to
};

// Ring AllReduce as src/ring does it: reduce-scatter then all-gather, 2(n-1) steps of S/n each,
// every rank sending to its right neighbour and receiving from its left one.
void SpawnRing(const SimConfig& c, const Fabric& f, Run* run);

// Reduction servers as the client and server do it (client/plan.h, client/server_communicator.cc):
// every worker stripes its buffer over the servers, cuts each stripe into chunks and keeps a
// bounded window of chunks in flight per server; a server reduces chunk k once all n workers'
// chunk k are in and sends the result to every worker.
void SpawnServers(const SimConfig& c, const Fabric& f, Run* run);

// Aggregation tree: `servers` leaf servers in every worker rack reduce that rack's chunks and
// forward one partial per chunk to a root server, which reduces the racks' partials and sends
// the result back to the leaves, which relay it to their rack's workers.
void SpawnTree(const SimConfig& c, const Fabric& f, Run* run);

}  // namespace optcast::sim
