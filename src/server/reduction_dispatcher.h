// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <memory>
#include <vector>

#include "server/buffer_pool.h"
#include "server/job.h"
#include "server/job_table.h"
#include "server/reduce_load.h"
#include "server/reduce_workers.h"
#include "server/server_metrics.h"

namespace optcast::server {

// Hears of chunks whose reduction finished: their result is in Slot::result.
class ReductionSink {
 public:
  virtual ~ReductionSink() = default;
  virtual void OnReduced(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit) = 0;
};

struct ChunkReduction;

// Reduces the chunk slots every member contributed to, for flat and tree jobs alike: on the
// event loop when waking a worker would cost more than the reduction, else on a worker thread.
// Either way the sink hears of the result, on the loop thread.
class ReductionDispatcher {
 public:
  // `offload_share`: ReduceLoad's threshold for handing chunks to the workers.
  ReductionDispatcher(ServerMetrics& metrics, JobTable& jobs, BufferPool& pool, double offload_share);
  ~ReductionDispatcher();
  ReductionDispatcher(const ReductionDispatcher&) = delete;
  ReductionDispatcher& operator=(const ReductionDispatcher&) = delete;

  void set_sink(ReductionSink* sink) { sink_ = sink; }
  // Worker threads beside the loop (0: the loop reduces every chunk). The threads start in
  // StartWorkers(): a process may fork in between (tests do), and should fork with one thread.
  void CreateWorkers(int threads);
  void StartWorkers();
  // Joins the workers while the tasks and buffers they use still exist.
  void StopWorkers();
  ReduceWorkers* workers() const { return workers_.get(); }

  // Reduces a full slot. A job that fails on the way (no memory for a tree's partial, a failed
  // reduction) is failed here and the sink hears nothing.
  void Reduce(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit);
  // Takes back the reductions the workers finished (their wake-up descriptor is readable).
  void CollectFinished();

 private:
  ChunkReduction* TakeTask();
  void ReleaseTask(ChunkReduction* task);
  // Fills a task with the slot's sources and destination; false if the job failed meanwhile.
  bool Prepare(const std::shared_ptr<Job>& job, const CollState& coll, Slot& slot, ChunkReduction* task);
  void RunHere(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit, ChunkReduction* task);
  // The reduction is in the task's destination: it becomes the slot's result.
  void Deliver(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit, ChunkReduction* task);

  ServerMetrics& metrics_;
  JobTable& jobs_;
  BufferPool& pool_;
  ReductionSink* sink_ = nullptr;
  ReduceLoad load_;
  std::unique_ptr<ReduceWorkers> workers_;
  std::vector<std::unique_ptr<ChunkReduction>> all_tasks_;
  std::vector<ChunkReduction*> free_tasks_;
  std::vector<ReduceTask*> finished_scratch_;
};

}  // namespace optcast::server
