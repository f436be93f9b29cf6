// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "sim/sim_config.h"

#include <fmt/format.h>

namespace optcast::sim {

const char* AlgoName(Algo a) {
  switch (a) {
    case Algo::kRing: return "ring";
    case Algo::kServers: return "servers";
    case Algo::kTree: return "tree";
  }
  return "?";
}

Status ParseAlgo(const std::string& s, Algo* out) {
  if (s == "ring")
    *out = Algo::kRing;
  else if (s == "servers")
    *out = Algo::kServers;
  else if (s == "tree")
    *out = Algo::kTree;
  else
    return InvalidArgument("unknown algorithm '" + s + "'; use ring, servers or tree");
  return Status::Ok();
}

const char* RootPlacementName(RootPlacement p) {
  switch (p) {
    case RootPlacement::kSpread: return "spread";
    case RootPlacement::kRack: return "rack";
    case RootPlacement::kSpine: return "spine";
  }
  return "?";
}

Status ParseRootPlacement(const std::string& s, RootPlacement* out) {
  if (s == "spread")
    *out = RootPlacement::kSpread;
  else if (s == "rack")
    *out = RootPlacement::kRack;
  else if (s == "spine")
    *out = RootPlacement::kSpine;
  else
    return InvalidArgument("--root-placement '" + s + "': use spread, rack or spine");
  return Status::Ok();
}

Status SimConfig::Validate() const {
  if (workers < 2) return InvalidArgument(fmt::format("--workers {}: need at least 2", workers));
  if (algo != Algo::kRing && servers < 1) return InvalidArgument("--servers must be at least 1");
  if (algo == Algo::kTree && roots < 1) return InvalidArgument("--roots must be at least 1");
  if (link_bps <= 0 || reduce_bps <= 0)
    return InvalidArgument("--link-mbit, --payload-share and --reduce-gbs must be positive");
  if (latency_s < 0 || per_chunk_s < 0) return InvalidArgument("--latency-us and --per-chunk-us must be >= 0");
  if (rack_size < 2) return InvalidArgument("--rack-size must be at least 2");
  if (oversub < 1) return InvalidArgument("--oversub must be >= 1 (1 = non-blocking)");
  if (bytes < 4) return InvalidArgument("--bytes must hold at least one float32");
  if (server_delay_s < 0) return InvalidArgument("--server-delay-us must be >= 0");
  if (host_flows < 1) return InvalidArgument("--host-flows must be at least 1");
  if (simulated_racks < 0) return InvalidArgument("--simulated-racks must be >= 0 (0 = all)");
  if (simulated_racks > 0) {
    if (algo == Algo::kRing)
      return InvalidArgument(
          "--simulated-racks: the ring has no symmetry to fold (every rank sends to its neighbour); "
          "drop the flag for --algo ring");
    if (workers % rack_size != 0)
      return InvalidArgument(
          fmt::format("--simulated-racks needs whole racks: --workers {} is not a multiple of "
                      "--rack-size {}",
                      workers, rack_size));
    if (simulated_racks > WorkerRacks())
      return InvalidArgument(
          fmt::format("--simulated-racks {}: there are only {} worker racks", simulated_racks, WorkerRacks()));
  }
  return Status::Ok();
}

}  // namespace optcast::sim
