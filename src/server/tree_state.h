// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <memory>

#include "server/tree_membership.h"
#include "server/upstream_link.h"

namespace optcast::server {

struct ConnState;

// A job's place in an aggregation tree (docs/tree.md): its members, and at a server below the
// root, its link to the parent server.
struct TreeState {
  explicit TreeState(uint32_t nranks) : members(nranks) {}
  TreeMembership members;
  std::unique_ptr<UpstreamLink> link;  // null at the root
  ConnState* up = nullptr;             // the connection to the parent; null once closed
};

}  // namespace optcast::server
