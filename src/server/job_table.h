// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "optcast/status.h"
#include "server/connection_loop.h"
#include "server/job.h"
#include "server/memory_budget.h"
#include "server/options.h"
#include "server/server_metrics.h"
#include "server/shared_jobs.h"

namespace optcast::server {

// Why a job must end: every member gets this code and text.
struct JobFailure {
  Code code = Code::kInternal;
  std::string text;
  bool over_limit = false;  // a memory or open-chunk limit ended it
};

// A job and collective step that went wrong for the whole job, or nothing.
using MaybeFailure = std::optional<JobFailure>;

// A status from a step that, when it failed, fails the whole job.
inline MaybeFailure AsFailure(const Status& st) {
  if (st.ok()) return std::nullopt;
  return JobFailure{st.code(), st.message()};
}

// The jobs this server serves, the memory they hold, and the jobs that failed recently (so that a
// rank arriving late learns why). Ending a job is one call: every member gets the error, the
// job's memory is freed, other jobs are untouched.
class JobTable {
 public:
  // `shared`: the server's memory budget and the jobs open on its lanes.
  JobTable(const ServerOptions& opts, ServerMetrics& metrics, ConnectionLoop& loop, SharedJobs& shared);
  ~JobTable();

  std::shared_ptr<Job> Find(const wire::JobIdBytes& id) const;
  // A new job for the first hello of its id.
  std::shared_ptr<Job> Create(const wire::Hello& h);
  // Why job `id` failed, if it did within the last job timeout.
  std::optional<Status> FailureOf(const wire::JobIdBytes& id) const;

  // Ends a job. `job` by value: callers may pass a connection's own `cs->job`, which this resets.
  void Fail(std::shared_ptr<Job> job, const JobFailure& why);
  // Fails the job and returns the status that stops reading the connection that brought it.
  Status Abort(std::shared_ptr<Job> job, const JobFailure& why);
  // Forgets a job that has no member connected and no collective open.
  void RetireIfIdle(const std::shared_ptr<Job>& job);
  // Fails the jobs whose oldest collective made no progress within the job timeout.
  void FailStalled(Clock::time_point now);
  void ForgetOldFailures(Clock::time_point now);

  // Charges per-collective or per-chunk state (`what` names it in the error) to the job.
  MaybeFailure ChargeState(Job& job, uint64_t bytes, const char* what);
  void ReleaseState(Job& job, uint64_t bytes);
  // Charges a buffer's capacity to the job; the buffer pool releases it with the buffer.
  MaybeFailure ChargeBuffer(Job& job, uint64_t capacity, const char* what);

  // Shutting down: no new jobs' collectives start.
  void set_draining() { draining_ = true; }
  bool draining() const { return draining_; }
  bool AnyInFlight() const;
  size_t InFlight() const;
  const MemoryBudget& memory() const { return *memory_; }
  const std::unordered_map<wire::JobIdBytes, std::shared_ptr<Job>, JobIdHash>& all() const { return jobs_; }
  // What collective `coll_seq` of the job waits for here, for a client whose own timeout fired:
  // the ranks ("1,3"), or a sentence saying why none can be named.
  std::string WaitingFor(const Job& job, uint64_t coll_seq) const;

 private:
  JobFailure MemoryFailure(const Job& job, const MemoryBudget& refused, uint64_t bytes, const char* what) const;
  // Takes `job` out of the table.
  void Forget(const std::shared_ptr<Job>& job);
  void RememberFailure(const wire::JobIdBytes& id, Code code, const std::string& text);
  // What a stalled collective waits for: the members that sent nothing, or in a tree, the tree.
  std::string WaitingFor(const Job& job, const CollState& coll) const;

  const ServerOptions& opts_;
  ServerMetrics& metrics_;
  ConnectionLoop& loop_;
  SharedJobs& shared_;
  std::shared_ptr<MemoryBudget> memory_;  // the server's budget, parent of every job's
  std::unordered_map<wire::JobIdBytes, std::shared_ptr<Job>, JobIdHash> jobs_;
  struct FailedJob {
    Code code;
    std::string text;
    Clock::time_point forget_at;
  };
  std::unordered_map<wire::JobIdBytes, FailedJob, JobIdHash> failed_jobs_;
  std::deque<wire::JobIdBytes> failed_order_;
  bool draining_ = false;
};

}  // namespace optcast::server
