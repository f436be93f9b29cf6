// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/reduce_workers.h"

#include <pthread.h>

#include <algorithm>

#include "observe/trace.h"
#include "reduce/combine.h"

namespace optcast::server {

Status ReduceTask::Reduce() {
  return reduce::Combine(dtype, op, srcs.data(), static_cast<int>(srcs.size()), dst, count);
}

int ReduceWorkers::ThreadsForCores(unsigned cores) {
  // hardware_concurrency() may say 0 (unknown): then one worker.
  return static_cast<int>(std::clamp<unsigned>(cores, 2, 65) - 1);
}

ReduceWorkers::ReduceWorkers(int threads, bool start_now) : thread_count_(threads) {
  if (start_now) Start();
}

void ReduceWorkers::Start() {
  if (!threads_.empty()) return;
  for (int i = 0; i < thread_count_; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

ReduceWorkers::~ReduceWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReduceWorkers::Submit(ReduceTask* task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back(task);
  }
  work_cv_.notify_one();
}

void ReduceWorkers::TakeFinished(std::vector<ReduceTask*>* out) {
  waker_.Drain();
  std::lock_guard<std::mutex> lock(mu_);
  out->insert(out->end(), finished_.begin(), finished_.end());
  finished_.clear();
}

void ReduceWorkers::WorkerLoop() {
  observe::TraceThreadName("server reduce worker");
  pthread_setname_np(pthread_self(), "optcast-reduce");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || queued_head_ < queued_.size(); });
    if (queued_head_ == queued_.size()) return;  // stopping, nothing left
    // Oldest first, so the chunks of a collective come back roughly in the order they arrived.
    ReduceTask* task = queued_[queued_head_++];
    if (queued_head_ == queued_.size()) {
      queued_.clear();
      queued_head_ = 0;
    }
    lock.unlock();
    {
      observe::TraceSpan span("reduce", "server");
      const auto t0 = std::chrono::steady_clock::now();
      task->status = task->Reduce();
      task->elapsed = std::chrono::steady_clock::now() - t0;
      if (span.on()) {
        span.args().Add("elements", static_cast<uint64_t>(task->count)).Add("ranks", task->srcs.size());
      }
    }
    lock.lock();
    // One wake-up per batch: the loop takes every finished task when it reads the eventfd.
    const bool was_empty = finished_.empty();
    finished_.push_back(task);
    if (was_empty) waker_.Wake();
  }
}

}  // namespace optcast::server
