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

// A server of several lanes (server/lane.h) keeps one set, the totals, and gives each lane a view
// of it: a lane's counts go to the totals (and, for bytes and connections, to series labelled
// with the lane), and the levels it sets add up there with the other lanes'.
class ServerMetrics {
 public:
  ServerMetrics();
  // Lane `lane`'s view of `totals`, which must outlive it.
  ServerMetrics(ServerMetrics& totals, int lane);
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;
  const observe::Registry& registry() const { return totals_->registry_; }

  void BytesIn(uint64_t n) {
    bytes_in_.Inc(n);
    if (lane_bytes_in_ != nullptr) lane_bytes_in_->Inc(n);
  }
  void BytesOut(uint64_t n) {
    bytes_out_.Inc(n);
    if (lane_bytes_out_ != nullptr) lane_bytes_out_->Inc(n);
  }
  void JobCreated() { jobs_created_.Inc(); }
  // A connection was refused before it joined a job: counted by the error's kind.
  void Error(Code code);
  // A job failed: counted by the error's kind, and as a failed job.
  void JobFailed(Code code) {
    totals_->jobs_failed_.fetch_add(1, std::memory_order_relaxed);
    Error(code);
  }
  // A job ended by a memory or open-chunk limit (also counted by JobFailed).
  void LimitFailure() { totals_->limit_failures_.fetch_add(1, std::memory_order_relaxed); }
  // A connection over the connection limit (also counted by Error).
  void ConnectionRefused() { totals_->connections_refused_.fetch_add(1, std::memory_order_relaxed); }
  // A hello without a valid proof of the secret.
  void AuthFailure() { totals_->auth_failures_.fetch_add(1, std::memory_order_relaxed); }
  // A lane's reduction threads; the totals have every lane's.
  void SetReduceThreads(uint64_t n) {
    totals_->reduce_threads_.fetch_add(n - mine_reduce_threads_, std::memory_order_relaxed);
    mine_reduce_threads_ = n;
  }
  void SetDraining() { totals_->draining_.store(true, std::memory_order_relaxed); }
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
  // This lane's levels (all but jobs, which SharedJobs counts over the lanes).
  void SetLevels(const Levels& l);
  // Levels that stats() reads, so they are set as soon as they change rather than once a sweep.
  // The server's job count, over all lanes (server/shared_jobs.h sets it).
  void SetJobs(size_t n) { jobs_.Set(static_cast<int64_t>(n)); }
  void SetConnections(size_t n) {
    Level(connections_, mine_.connections, static_cast<int64_t>(n));
    if (lane_connections_ != nullptr) lane_connections_->Set(static_cast<int64_t>(n));
  }
  void SetBufferBytes(size_t n) { Level(buffer_bytes_, mine_.buffer_bytes, static_cast<int64_t>(n)); }

  uint64_t bytes_in() const { return bytes_in_.value(); }
  uint64_t bytes_out() const { return bytes_out_.value(); }
  uint64_t chunks_done() const { return chunks_.value(); }
  uint64_t reduced_on_workers() const { return reduced_on_workers_.value(); }
  uint64_t jobs() const { return static_cast<uint64_t>(jobs_.value()); }
  uint64_t connections() const { return static_cast<uint64_t>(connections_.value()); }
  uint64_t buffer_bytes() const { return static_cast<uint64_t>(buffer_bytes_.value()); }
  uint64_t jobs_failed() const { return totals_->jobs_failed_.load(std::memory_order_relaxed); }
  uint64_t limit_failures() const { return totals_->limit_failures_.load(std::memory_order_relaxed); }
  uint64_t connections_refused() const { return totals_->connections_refused_.load(std::memory_order_relaxed); }
  uint64_t auth_failures() const { return totals_->auth_failures_.load(std::memory_order_relaxed); }
  uint64_t reduce_threads() const { return totals_->reduce_threads_.load(std::memory_order_relaxed); }
  bool draining() const { return totals_->draining_.load(std::memory_order_relaxed); }

 private:
  // Moves a level that this lane holds at `mine` to `v`, in the sum over the lanes.
  static void Level(observe::Gauge& g, int64_t& mine, int64_t v) {
    g.Add(v - mine);
    mine = v;
  }

  ServerMetrics* const totals_;  // this, or the set a lane's view counts in
  observe::Registry registry_;   // the totals' (empty in a lane's view)
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
  // A lane's view: its share of the levels, and its own series.
  Levels mine_;
  uint64_t mine_reduce_threads_ = 0;
  observe::Counter* lane_bytes_in_ = nullptr;
  observe::Counter* lane_bytes_out_ = nullptr;
  observe::Gauge* lane_connections_ = nullptr;
};

}  // namespace optcast::server
