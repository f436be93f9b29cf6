// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "optcast/status.h"
#include "transport/endpoint.h"

namespace optcast::server {

struct ServerOptions {
  transport::Endpoint listen{"0.0.0.0", 8918};
  // A job whose collective makes no progress for this long fails with an error to every rank.
  std::chrono::milliseconds job_timeout{30000};
  // A connection that has not said hello within this long is dropped.
  std::chrono::milliseconds hello_timeout{10000};
  // Largest chunk payload accepted in one message.
  uint64_t max_payload = 64u << 20;
};

struct ServerStats {
  uint64_t jobs_active = 0;
  uint64_t connections = 0;
  uint64_t jobs_failed = 0;
  uint64_t chunks_reduced = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t buffer_bytes_outstanding = 0;
};

// The reduction server: serves many jobs at once on one event loop. Thread-compatible: Run() on
// one thread, Stop() and stats() from any.
class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Binds the listening socket (port 0 picks one).
  Status Start();
  uint16_t port() const;
  // Serves until Stop(). Returns the error that ended the loop, if any.
  Status Run();
  void Stop();
  ServerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace optcast::server
