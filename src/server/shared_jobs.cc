// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/shared_jobs.h"

namespace optcast::server {

SharedJobs::SharedJobs(uint64_t memory_limit, uint64_t job_memory_limit, ServerMetrics& totals)
    : job_memory_limit_(job_memory_limit),
      memory_(std::make_shared<MemoryBudget>("--memory-limit", memory_limit)),
      totals_(totals) {}

std::shared_ptr<MemoryBudget> SharedJobs::Open(const wire::JobIdBytes& id) {
  std::lock_guard lock(mu_);
  Entry& e = jobs_[id];
  if (e.lanes++ == 0) {
    e.budget = std::make_shared<MemoryBudget>("--job-memory-limit", job_memory_limit_, memory_);
    totals_.JobCreated();
    totals_.SetJobs(jobs_.size());
  }
  return e.budget;
}

void SharedJobs::Close(const wire::JobIdBytes& id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || --it->second.lanes > 0) return;
  jobs_.erase(it);
  totals_.SetJobs(jobs_.size());
}

size_t SharedJobs::open() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

}  // namespace optcast::server
