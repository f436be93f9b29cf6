// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "server/job.h"
#include "server/memory_budget.h"
#include "server/server_metrics.h"

namespace optcast::server {

// What a server's lanes (server/lane.h) share about jobs: the server's memory budget, and which
// jobs are open on any lane. A rank joins every lane of a server, so one job is open on each
// lane at once; its memory limit and the server's job count are the server's, not a lane's.
// Thread-safe; touched when a lane opens or closes a job, never per chunk.
class SharedJobs {
 public:
  SharedJobs(uint64_t memory_limit, uint64_t job_memory_limit, ServerMetrics& totals);

  // A lane opens job `id`: the job's budget, one for all the lanes that have it open. A job
  // opened by no other lane counts as created.
  std::shared_ptr<MemoryBudget> Open(const wire::JobIdBytes& id);
  // A lane is done with job `id`.
  void Close(const wire::JobIdBytes& id);
  size_t open() const;
  const std::shared_ptr<MemoryBudget>& memory() const { return memory_; }

 private:
  struct Entry {
    std::shared_ptr<MemoryBudget> budget;
    int lanes = 0;
  };
  const uint64_t job_memory_limit_;
  const std::shared_ptr<MemoryBudget> memory_;  // the server's budget, parent of every job's
  ServerMetrics& totals_;
  mutable std::mutex mu_;
  std::unordered_map<wire::JobIdBytes, Entry, JobIdHash> jobs_;
};

}  // namespace optcast::server
