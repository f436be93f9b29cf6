// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/emu/tree_layout.h"

#include <fmt/format.h>

#include <algorithm>

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
  for (int w = 0; w < workers; ++w) t.worker_server.push_back(1 + inner + w % leaves);
  *out = std::move(t);
  return Status::Ok();
}

int TreeLayout::BusiestServerLoad() const {
  std::vector<int> load(parent.size(), 0);
  for (size_t s = 0; s < parent.size(); ++s) {
    if (parent[s] >= 0) {
      ++load[s];          // to and from its parent
      ++load[parent[s]];  // the parent's side of that link
    }
  }
  for (int s : worker_server) ++load[s];
  return *std::max_element(load.begin(), load.end());
}

}  // namespace optcast::tools::emu
