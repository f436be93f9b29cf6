// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/tree_membership.h"
#include "server/upstream_link.h"

namespace optcast::server {

struct ConnState;

// A job's place in an aggregation tree (docs/tree.md): its members here, and at a server below
// the root, its link to the parent server. The arithmetic is in tree_math.h, membership and
// sealing in tree_membership.h, the parent handshake in upstream_link.h, what goes up the link in
// tree_upstream.h. It knows no Job, so that a Job can hold one.
class TreeJob {
 public:
  explicit TreeJob(uint32_t nranks) : members(nranks) {}

  TreeMembership members;
  std::unique_ptr<UpstreamLink> link;  // null at the root
  ConnState* up = nullptr;             // the connection to the parent; null once closed

  bool root() const { return link == nullptr; }
  // A slot that `arrived` members contributed to is ready once the job is sealed (until then
  // more members may join) and every member contributed.
  bool SlotFull(uint32_t arrived) const { return members.sealed() && arrived == members.members(); }
  // What a job that timed out was waiting for: the members here that sent nothing, the ranks
  // that have not joined the tree yet, or the parent.
  std::string WaitingFor(const std::vector<uint32_t>& missing) const;
};

}  // namespace optcast::server
