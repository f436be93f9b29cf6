// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "optcast/status.h"
#include "server/options.h"

namespace optcast::observe {
class Registry;
}

namespace optcast::server {

struct ServerStats {
  uint64_t jobs_active = 0;
  uint64_t connections = 0;
  uint64_t jobs_failed = 0;
  uint64_t chunks_reduced = 0;
  uint64_t chunks_reduced_on_workers = 0;  // of which on reduction threads
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t buffer_bytes_outstanding = 0;
  uint64_t memory_used = 0;          // charged against the memory limit
  uint64_t connections_refused = 0;  // over the connection limit
  uint64_t limit_failures = 0;       // jobs ended by a memory or open-chunk limit
  uint64_t auth_failures = 0;        // hellos without a valid proof of the secret
  bool draining = false;             // shutting down: the listener is closed
  uint64_t reduce_threads = 0;       // over all lanes
  uint64_t lanes = 0;                // event loops (--io-threads)
};

// The reduction server: serves many jobs at once on one or more lanes (server/lane.h), each an
// event loop that owns its connections, jobs and buffers; Run() starts the lanes' threads and
// their reduction workers, which only read and write chunk buffers a loop hands them.
// Thread-compatible: Run() on one thread, Stop() and stats() from any.
class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Binds the listening socket (port 0 picks one).
  Status Start();
  uint16_t port() const;
  // Serves until Stop(), or until a drain ends. Returns the error that ended the loop, if any.
  Status Run();
  // Stops at once: open collectives are abandoned (their ranks see the connections close).
  void Stop();
  // Graceful shutdown: stops accepting connections and new collectives, lets the collectives in
  // flight finish for up to `deadline`, fails what is left with an error, then Run() returns.
  // Thread-safe; a second call does not extend the deadline.
  void Drain(std::chrono::milliseconds deadline);
  ServerStats stats() const;
  // The server's Prometheus metrics (see server_metrics.h), safe to render from any thread.
  const observe::Registry& metrics() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace optcast::server
