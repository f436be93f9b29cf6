// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Which emulated server forwards to which, and which server each worker talks to, for
// `optcast emu run --tree` (docs/tree.md). Server 0 is the root. Depth 2: every other server is a
// leaf under the root. Depth 3: the first (servers - 1) / 2 of the others are inner servers under
// the root, the rest leaves spread over them. Workers are spread over the leaves.

#include <vector>

#include "optcast/status.h"

namespace optcast::tools::emu {

struct TreeLayout {
  std::vector<int> parent;         // by server; -1 for the root
  std::vector<int> worker_server;  // by worker: its leaf

  // Fails, naming the need, when `servers` cannot form a tree of `depth` (2 or 3) levels.
  static Status Make(int servers, int workers, int depth, TreeLayout* out);

  // The most buffers any server moves each way per allreduce (one per own worker, one per child
  // server, one to its parent): the tree's algbw bound is the link rate divided by this.
  int BusiestServerLoad() const;
};

}  // namespace optcast::tools::emu
