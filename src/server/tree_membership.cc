// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/tree_membership.h"

#include <fmt/format.h>

#include <algorithm>

namespace optcast::server {

Status TreeMembership::Add(uint32_t index, bool server) {
  if (sealed_) {
    return InvalidArgument(
        fmt::format("member {} joined after all {} ranks of the job had joined the tree; every "
                    "rank must join exactly one leaf server",
                    index, nranks_));
  }
  // Weight starts at 0; a rank counts itself through Grow below, a server through its Grow messages.
  if (!members_.emplace(index, Member{0, index, server, static_cast<uint32_t>(seated_.size())}).second) {
    return InvalidArgument(fmt::format("member {} joined twice", index));
  }
  seated_.push_back(index);
  if (!server) return Grow(index, 1, index);
  return Status::Ok();
}

Status TreeMembership::Grow(uint32_t index, uint32_t weight, uint32_t min_rank) {
  auto it = members_.find(index);
  if (it == members_.end()) return InternalError(fmt::format("growth of unknown member {}", index));
  if (sealed_) {
    return InvalidArgument(fmt::format("a downstream server reported {} ranks after the job was sealed", weight));
  }
  if (weight < it->second.weight || min_rank >= nranks_) {
    return ProtocolError(fmt::format("bad growth report: weight {} (was {}), lowest rank {} of {}", weight,
                                     it->second.weight, min_rank, nranks_));
  }
  const uint64_t total = uint64_t{weight_} - it->second.weight + weight;
  if (total > nranks_) {
    return InvalidArgument(
        fmt::format("{} ranks joined the tree of a job of {} ranks; a rank is counted twice (does "
                    "a worker talk to two leaf servers of one tree?)",
                    total, nranks_));
  }
  weight_ = static_cast<uint32_t>(total);
  it->second.weight = weight;
  it->second.min_rank = min_rank;
  min_rank_ = std::min(min_rank_, min_rank);
  return Status::Ok();
}

Status TreeMembership::Seal() {
  if (sealed_) return Status::Ok();
  for (const auto& [index, m] : members_) {
    if (m.weight == 0) {
      return InternalError(fmt::format("downstream server {} carries no rank when the job is sealed", index));
    }
  }
  sealed_ = true;
  order_.clear();
  for (const auto& [index, m] : members_) order_.push_back(index);
  std::sort(order_.begin(), order_.end(),
            [this](uint32_t a, uint32_t b) { return members_.at(a).min_rank < members_.at(b).min_rank; });
  return Status::Ok();
}

bool TreeMembership::is_server(uint32_t index) const {
  auto it = members_.find(index);
  return it != members_.end() && it->second.server;
}

std::vector<uint32_t> TreeMembership::servers() const {
  std::vector<uint32_t> out;
  for (const auto& [index, m] : members_) {
    if (m.server) out.push_back(index);
  }
  return out;
}

}  // namespace optcast::server
