// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/emu/tree_layout.h"

#include <fmt/format.h>

namespace optcast::tools::emu {

Status TreeLayout::Make(int servers, int workers, int depth, TreeLayout* out) {
  if (depth != 2 && depth != 3) return InvalidArgument(fmt::format("--tree-depth {}: use 2 or 3", depth));
  if (servers < depth) {
    return InvalidArgument(fmt::format("a tree of depth {} needs --servers >= {} (a root, {}leaves)", depth, depth,
                                       depth == 3 ? "inner servers, " : ""));
  }
  const int inner = depth == 3 ? (servers - 1) / 2 : 0;
  const int leaves = servers - 1 - inner;
  TreeLayout t;
  t.parent.assign(servers, 0);
  t.parent[0] = -1;
  for (int l = 0; l < leaves; ++l) t.parent[1 + inner + l] = inner > 0 ? 1 + l % inner : 0;
  for (int w = 0; w < workers; ++w) t.worker_servers.push_back({1 + inner + w % leaves});
  *out = std::move(t);
  return Status::Ok();
}

Status TreeLayout::MakeRacked(int servers, int workers, int racks, TreeLayout* out) {
  if (racks < 2 || workers % racks != 0) {
    return InvalidArgument(
        fmt::format("a tree over racks needs --racks >= 2 dividing --workers ({} workers, {} racks)", workers, racks));
  }
  if (servers < racks + 1 || servers % (racks + 1) != 0) {
    return InvalidArgument(fmt::format(
        "a tree over {} racks needs --servers a multiple of {} (L leaves per rack and L roots, one per tree); "
        "e.g. --servers {} for one leaf per rack",
        racks, racks + 1, racks + 1));
  }
  const int trees = servers / (racks + 1);
  const int per_rack = workers / racks;
  TreeLayout t;
  t.parent.assign(servers, -1);
  t.server_rack.assign(servers, 0);
  for (int j = 0; j < trees; ++j) t.server_rack[j] = j % racks;
  for (int k = 0; k < racks; ++k) {
    for (int j = 0; j < trees; ++j) {
      const int leaf = trees + k * trees + j;
      t.parent[leaf] = j;
      t.server_rack[leaf] = k;
    }
  }
  for (int w = 0; w < workers; ++w) {
    std::vector<int> leaves;
    for (int j = 0; j < trees; ++j) leaves.push_back(trees + (w / per_rack) * trees + j);
    t.worker_servers.push_back(std::move(leaves));
  }
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace optcast::tools::emu
