// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Everything one simulated AllReduce depends on: the fabric, the algorithm and the message.

#include <cstdint>
#include <string>

#include "optcast/status.h"

namespace optcast::sim {

enum class Algo { kRing, kServers, kTree };
const char* AlgoName(Algo a);
Status ParseAlgo(const std::string& s, Algo* out);

// Where a tree's roots sit (docs/scale.md, "Root placement").
//   spread: root q takes an extra port in worker rack q mod racks, so each rack's uplink carries
//           the partials of its own roots' stripes only (the default, as `optcast topology` does);
//   rack:   all roots fill racks of their own, whose uplinks carry every rack's partials;
//   spine:  each root hangs off the spine by its own port, behind no rack uplink.
enum class RootPlacement { kSpread, kRack, kSpine };
const char* RootPlacementName(RootPlacement p);
Status ParseRootPlacement(const std::string& s, RootPlacement* out);

struct SimConfig {
  // Fabric: racks of `rack_size` host ports behind a leaf switch, leaf switches joined by a
  // non-blocking spine through an uplink of rack_size * link_bps / oversub each way.
  double link_bps = 25e6;    // bytes/s of payload per host link, each way
  double latency_s = 50e-6;  // one way, host to host through one leaf switch
  int rack_size = 32;        // host ports per leaf switch
  double oversub = 1.0;      // host ports : uplink capacity of a leaf switch
  double reduce_bps = 10e9;  // bytes of input a server reduces per second
  double per_chunk_s = 0.0;  // fixed server cost per chunk received (wake-up, syscalls)
  // Delay between a server finishing a chunk and its result leaving. 0 on a real cluster; on the
  // emulated one (docs/emulated-cluster.md) every host shares one busy 2-core machine and a
  // server waits for a CPU far longer than it runs (docs/scale.md, "Calibration").
  double server_delay_s = 0.0;

  Algo algo = Algo::kRing;
  int workers = 8;
  int servers = 8;  // flat: servers; tree: leaf servers per worker rack
  int roots = 1;    // tree: root servers
  RootPlacement root_placement = RootPlacement::kSpread;
  uint64_t bytes = 64ull << 20;  // AllReduce size (float32)
  uint64_t chunk_bytes = 0;      // 0: the client's own choice (client/plan.h)
  int window = 0;                // chunks per server link; 0: the client's byte-bounded window
  int host_flows = 16;           // most messages a host has on the wire at once (see node.h)
  // Tree: a leaf server sends its partial to the root ahead of the results it has queued for its
  // workers, as src/server does (the partial has a connection of its own to the parent, so it never
  // waits behind results; on the wire it shares the port with them). Off: one queue, oldest first.
  bool partials_first = true;
  // Symmetry fold (docs/scale.md, "The fold"): simulate only this many worker racks (0: all). The
  // racks of a flat-server or tree job are alike, so the others are folded onto these: every
  // server all racks share (flat servers, tree roots) keeps the simulated racks' share of its
  // link, its rack's uplink and its reduce rate, simulated_racks / worker racks.
  int simulated_racks = 0;

  int WorkerRacks() const { return (workers + rack_size - 1) / rack_size; }
  bool Folded() const { return simulated_racks > 0 && simulated_racks < WorkerRacks(); }
  // Workers that are simulated, and the share of a shared server they see.
  int SimulatedWorkers() const { return Folded() ? simulated_racks * rack_size : workers; }
  double FoldShare() const { return Folded() ? static_cast<double>(simulated_racks) / WorkerRacks() : 1.0; }

  Status Validate() const;
};

}  // namespace optcast::sim
