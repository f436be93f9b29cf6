// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Which emulated server forwards to which, and which servers each worker talks to, for
// `optcast emu run --tree` (docs/tree.md).
//
// One switch: server 0 is the root. Depth 2: every other server is a leaf under the root. Depth 3:
// the first (servers - 1) / 2 of the others are inner servers under the root, the rest leaves
// spread over them. Workers are spread over the leaves, one leaf each.
//
// Racks (--racks R): as `optcast topology` lays a cluster out, L = servers / (R + 1) trees. Servers
// 0..L-1 are the roots, root j in rack j mod R (spread, so that no uplink carries more than its
// share); then L leaves per rack, leaf j of rack k is server L + k*L + j with parent root j. Every
// worker lists its own rack's leaves in tree order, so stripe j meets the other racks' stripe j
// at root j.

#include <vector>

#include "optcast/status.h"

namespace optcast::tools::emu {

struct TreeLayout {
  std::vector<int> parent;                       // by server; -1 for a root
  std::vector<std::vector<int>> worker_servers;  // by worker: its leaves, in tree order
  std::vector<int> server_rack;                  // racks only: the rack of each server

  // Fails, naming the need, when `servers` cannot form a tree of `depth` (2 or 3) levels.
  static Status Make(int servers, int workers, int depth, TreeLayout* out);
  // Depth 2 over `racks` racks of workers/racks workers each (see above).
  static Status MakeRacked(int servers, int workers, int racks, TreeLayout* out);
};

}  // namespace optcast::tools::emu
