// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "config/root_placement.h"

#include <fmt/format.h>

#include <map>

namespace optcast::config {

std::vector<std::string> RootPlacementWarnings(const Topology& topo) {
  std::map<std::string, std::vector<std::string>> roots_by_rack;
  for (const auto& s : topo.servers) {
    if (!s.parent.empty() || s.rack.empty() || s.rack == kSpineRack || topo.Children(s.name).empty()) continue;
    roots_by_rack[s.rack].push_back(s.name);
  }
  std::vector<std::string> out;
  for (const auto& [rack, roots] : roots_by_rack) {
    if (roots.size() < 2) continue;
    out.push_back(fmt::format(
        "{}: roots {} all sit in rack '{}', whose uplink then carries every rack's partials for {} stripes; "
        "give each root a rack of its own or `rack: spine` (`optcast topology` spreads them)",
        topo.path, fmt::join(roots, ", "), rack, roots.size()));
  }
  return out;
}

}  // namespace optcast::config
