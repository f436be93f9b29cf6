// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/tree_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace optcast::server {

std::string TreeJob::WaitingFor(const std::vector<uint32_t>& missing) const {
  if (members.sealed() && !missing.empty()) return fmt::format("{}", fmt::join(missing, ","));
  if (!members.sealed() && !link) {
    return fmt::format("(only {} of the job's {} ranks have joined the tree)", members.weight(), members.nranks());
  }
  if (link) {
    return fmt::format("(none here: waiting for the upstream server {}{})", link->parent(),
                       members.sealed() ? "" : " to report that every rank has joined the tree");
  }
  return "(unknown)";
}

}  // namespace optcast::server
