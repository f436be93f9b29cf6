// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "optcast/status.h"
#include "optcast/types.h"
#include "transport/posix/poller.h"

namespace optcast::server {

// One reduction handed from the event loop to a worker. The loop fills the inputs and keeps
// everything they point to alive until the task comes back; a worker touches only the inputs
// and `status`. The server derives from it to carry its own bookkeeping, which workers never
// read, so a task costs no allocation once the loop has recycled a few.
struct ReduceTask {
  virtual ~ReduceTask() = default;
  // Runs on a worker: dst = op(srcs...) in the order of srcs. A reduction of another shape (an
  // aggregation tree's partials) overrides it.
  virtual Status Reduce();
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  std::vector<const void*> srcs;  // in rank order
  void* dst = nullptr;            // may be srcs[0]
  size_t count = 0;
  Status status;                        // set by the worker: what Reduce() returned
  std::chrono::nanoseconds elapsed{0};  // set by the worker: time spent reducing
};

// Threads that run ReduceTasks for one event loop. Submit and TakeFinished are called from the
// loop thread only; the loop polls wake_fd() and collects finished tasks when it is readable.
class ReduceWorkers {
 public:
  // Worker threads for a machine with `cores` cores: one core stays with the event loop (and
  // the kernel's network stack), the rest reduce.
  static int ThreadsForCores(unsigned cores);

  // Opens the wake-up descriptor; the threads start now or, with start_now false, at Start()
  // (a process that forks in between, as tests do, should fork with no thread but its own).
  explicit ReduceWorkers(int threads, bool start_now = true);
  ~ReduceWorkers();  // finishes queued tasks, joins the threads
  void Start();      // idempotent
  ReduceWorkers(const ReduceWorkers&) = delete;
  ReduceWorkers& operator=(const ReduceWorkers&) = delete;

  int threads() const { return thread_count_; }
  int wake_fd() const { return waker_.fd(); }

  // Queues a task (threads() must be > 0).
  void Submit(ReduceTask* task);
  // Appends the finished tasks, in no particular order, to *out; clears the wake-up.
  void TakeFinished(std::vector<ReduceTask*>* out);

 private:
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::vector<ReduceTask*> queued_;  // FIFO from queued_head_; storage reused once drained
  size_t queued_head_ = 0;
  std::vector<ReduceTask*> finished_;
  bool stopping_ = false;
  transport::Waker waker_;
  int thread_count_;
  std::vector<std::thread> threads_;
};

}  // namespace optcast::server
