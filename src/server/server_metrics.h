// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The reduction server's counters, kept once: the Prometheus metrics, plus a few counts that only
// Server::stats() reports. The server's threads update them without locks; the metrics endpoint
// and stats() read them from their own threads.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "observe/metrics.h"
#include "optcast/status.h"
#include "optcast/types.h"

namespace optcast::server {

class ServerMetrics {
 public:
  ServerMetrics();
  const observe::Registry& registry() const { return registry_; }

  void BytesIn(uint64_t n) { bytes_in_.Inc(n); }
  void BytesOut(uint64_t n) { bytes_out_.Inc(n); }
  void JobCreated() { jobs_created_.Inc(); }
  // A connection was refused before it joined a job: counted by the error's kind.
  void Error(Code code);
  // A job failed: counted by the error's kind, and as a failed job.
  void JobFailed(Code code) {
    jobs_failed_.fetch_add(1, std::memory_order_relaxed);
    Error(code);
  }
  // A job ended by a memory or open-chunk limit (also counted by JobFailed).
  void LimitFailure() { limit_failures_.fetch_add(1, std::memory_order_relaxed); }
  // A connection over the connection limit (also counted by Error).
  void ConnectionRefused() { connections_refused_.fetch_add(1, std::memory_order_relaxed); }
  // A hello without a valid proof of the secret.
  void AuthFailure() { auth_failures_.fetch_add(1, std::memory_order_relaxed); }
  void SetReduceThreads(uint64_t n) { reduce_threads_.store(n, std::memory_order_relaxed); }
  void SetDraining() { draining_.store(true, std::memory_order_relaxed); }
  void CollectiveDone(CollType coll);
  // A job moved off servers that died (an epoch its ranks applied here).
  void Failover() { failovers_.Inc(); }
  uint64_t failovers() const { return failovers_.value(); }
  void ChunkDone(std::chrono::steady_clock::duration latency);
  void Reduced(std::chrono::steady_clock::duration took);
  // A chunk handed to a reduction thread rather than reduced on the event loop.
  void ReducedOnWorker() { reduced_on_workers_.Inc(); }

  struct Levels {
    int64_t jobs = 0;
    int64_t ranks = 0;
    int64_t connections = 0;
    int64_t send_queue = 0;      // messages queued on connections, not yet written
    int64_t chunks_pending = 0;  // chunk slots waiting for contributions
    int64_t buffer_bytes = 0;    // chunk memory in use
  };
  void SetLevels(const Levels& l);
  // Levels that stats() reads, so they are set as soon as they change rather than once a sweep.
  void SetJobs(size_t n) { jobs_.Set(static_cast<int64_t>(n)); }
  void SetConnections(size_t n) { connections_.Set(static_cast<int64_t>(n)); }
  void SetBufferBytes(size_t n) { buffer_bytes_.Set(static_cast<int64_t>(n)); }

  uint64_t bytes_in() const { return bytes_in_.value(); }
  uint64_t bytes_out() const { return bytes_out_.value(); }
  uint64_t chunks_done() const { return chunks_.value(); }
  uint64_t reduced_on_workers() const { return reduced_on_workers_.value(); }
  uint64_t jobs() const { return static_cast<uint64_t>(jobs_.value()); }
  uint64_t connections() const { return static_cast<uint64_t>(connections_.value()); }
  uint64_t buffer_bytes() const { return static_cast<uint64_t>(buffer_bytes_.value()); }
  uint64_t jobs_failed() const { return jobs_failed_.load(std::memory_order_relaxed); }
  uint64_t limit_failures() const { return limit_failures_.load(std::memory_order_relaxed); }
  uint64_t connections_refused() const { return connections_refused_.load(std::memory_order_relaxed); }
  uint64_t auth_failures() const { return auth_failures_.load(std::memory_order_relaxed); }
  uint64_t reduce_threads() const { return reduce_threads_.load(std::memory_order_relaxed); }
  bool draining() const { return draining_.load(std::memory_order_relaxed); }

 private:
  observe::Registry registry_;
  observe::Counter& bytes_in_;
  observe::Counter& bytes_out_;
  observe::Counter& jobs_created_;
  observe::Counter& chunks_;
  observe::Counter& failovers_;
  observe::Counter& reduced_on_workers_;
  observe::Counter* collectives_[3];
  observe::Counter* errors_[11];
  observe::Histogram& chunk_latency_;
  observe::Histogram& reduce_time_;
  observe::Gauge& jobs_;
  observe::Gauge& ranks_;
  observe::Gauge& connections_;
  observe::Gauge& send_queue_;
  observe::Gauge& chunks_pending_;
  observe::Gauge& buffer_bytes_;
  // Not exported: optcast_server_errors_total already has them by kind.
  std::atomic<uint64_t> jobs_failed_{0};
  std::atomic<uint64_t> limit_failures_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> auth_failures_{0};
  std::atomic<uint64_t> reduce_threads_{0};
  std::atomic<bool> draining_{false};
};

}  // namespace optcast::server
