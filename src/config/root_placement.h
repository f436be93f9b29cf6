// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Where a topology's roots sit. Stripe j of every worker goes to leaf j of its rack and meets the
// other racks' stripe j at that leaf's root, so a root's rack uplink carries one partial in and
// one result out per worker rack, for each of its stripes. Two roots in one rack double that
// rack's share; all roots in one rack put the whole job's partials through one uplink, which an
// oversubscribed fabric cannot carry (docs/scale.md, "Root placement"). So roots go in different
// racks (`rack:` of a root entry) or on the spine (`rack: spine`), as `optcast topology` writes.

#include <string>
#include <vector>

#include "config/topology.h"

namespace optcast::config {

// The rack label that places a root on the spine, behind no rack uplink.
inline constexpr char kSpineRack[] = "spine";

// One sentence per rack that holds two or more roots (entries without a parent that have child
// servers), naming the roots and the fix; empty when every root has a rack of its own, sits on
// the spine, or carries no rack label (nothing to check).
std::vector<std::string> RootPlacementWarnings(const Topology& topo);

}  // namespace optcast::config
