// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The reduction server's Prometheus metrics. The server's threads update them without locks; the
// metrics endpoint renders them from its own thread.

#include <chrono>
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
  // A job failed, or a connection was refused before it joined one: counted by the error's kind.
  void Error(Code code);
  void CollectiveDone(CollType coll);
  void ChunkDone(std::chrono::steady_clock::duration latency);
  void Reduced(std::chrono::steady_clock::duration took);

  struct Levels {
    int64_t jobs = 0;
    int64_t ranks = 0;
    int64_t connections = 0;
    int64_t send_queue = 0;      // messages queued on connections, not yet written
    int64_t chunks_pending = 0;  // chunk slots waiting for contributions
    int64_t buffer_bytes = 0;    // chunk memory in use
  };
  void SetLevels(const Levels& l);

 private:
  observe::Registry registry_;
  observe::Counter& bytes_in_;
  observe::Counter& bytes_out_;
  observe::Counter& jobs_created_;
  observe::Counter& chunks_;
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
};

}  // namespace optcast::server
