// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Who a server combines for one job of an aggregation tree (docs/tree.md). Members are the
// job's ranks that said hello here (weight 1) and downstream servers (weight: the ranks they
// carry, reported by Grow). The root knows every rank has joined the tree once its members'
// weights add up to the job's nranks; it then seals the job and tells its downstream servers,
// which seal too. Only a sealed server combines: its member set, and the order in which it
// combines them (by each member's lowest rank), are then fixed, so every run adds in the same
// order whatever the timing of the hellos.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "optcast/status.h"

namespace optcast::server {

class TreeMembership {
 public:
  explicit TreeMembership(uint32_t nranks) : nranks_(nranks) {}

  // A member said hello as `index` (a rank, or the first rank a downstream server admitted).
  Status Add(uint32_t index, bool server);
  // A downstream server now carries `weight` ranks, the lowest being `min_rank`.
  Status Grow(uint32_t index, uint32_t weight, uint32_t min_rank);
  // Fixes the member set and the combination order; no member may join afterwards.
  Status Seal();

  uint32_t nranks() const { return nranks_; }
  uint32_t weight() const { return weight_; }
  uint32_t min_rank() const { return min_rank_; }
  bool complete() const { return weight_ == nranks_; }
  bool sealed() const { return sealed_; }
  size_t members() const { return members_.size(); }
  bool is_member(uint32_t index) const { return members_.count(index) != 0; }
  bool is_server(uint32_t index) const;
  // Member indices in combination order (valid once sealed).
  const std::vector<uint32_t>& order() const { return order_; }
  // Members in the order they joined: a member's seat is its position here, and where its
  // contribution sits in a chunk slot, so slots hold one entry per member (the server's fan-in),
  // however many ranks the job has.
  const std::vector<uint32_t>& seated() const { return seated_; }
  uint32_t seat(uint32_t index) const { return members_.at(index).seat; }
  std::vector<uint32_t> servers() const;

 private:
  struct Member {
    uint32_t weight = 0;
    uint32_t min_rank = 0;
    bool server = false;
    uint32_t seat = 0;
  };
  uint32_t nranks_;
  uint32_t weight_ = 0;
  uint32_t min_rank_ = UINT32_MAX;
  bool sealed_ = false;
  std::map<uint32_t, Member> members_;
  std::vector<uint32_t> order_;
  std::vector<uint32_t> seated_;
};

}  // namespace optcast::server
