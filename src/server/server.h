// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "optcast/status.h"
#include "transport/endpoint.h"
#include "transport/options.h"
#include "transport/traffic_class.h"
#include "wire/protocol.h"

namespace optcast::observe {
class Registry;
}

namespace optcast::server {

struct ServerOptions {
  transport::Endpoint listen{"0.0.0.0", 8918};
  // What carries the protocol, the built-in TCP streams or libfabric (docs/transports.md), and
  // each one's settings (transport/options.h): the tcp connections' congestion control and the
  // DSCP of the latency class (transport.tcp.latency_dscp, 0: nothing marked), the libfabric
  // provider.
  transport::TransportOptions transport;
  // Results of latency-bound collectives (at most latency_bytes: count times the element size)
  // go out in the latency traffic class, as ranks send their chunks (CommunicatorOptions,
  // transport/traffic_class.h).
  uint64_t latency_bytes = 64 * 1024;
  transport::TrafficClass TrafficClassOf(const wire::CollDesc& d) const {
    // Divided, not multiplied: a count from the wire may be anything.
    return d.count <= latency_bytes / DataTypeSize(d.dtype) ? transport::TrafficClass::kLatency
                                                            : transport::TrafficClass::kBulk;
  }
  // A job whose collective makes no progress for this long fails with an error to every rank.
  std::chrono::milliseconds job_timeout{30000};
  // A connection that has not said hello within this long is dropped.
  std::chrono::milliseconds hello_timeout{10000};
  // Largest chunk payload accepted in one message.
  uint64_t max_payload = 64u << 20;
  // Bytes of chunk buffers and chunk state the server holds at most (0: half the physical memory).
  uint64_t memory_limit = 0;
  // The same for one job (0: the server's limit).
  uint64_t job_memory_limit = 0;
  // Connections served at once (0: from the process's open-file limit).
  uint32_t max_connections = 0;
  // Chunks one rank may have sent without an answer yet; clients keep a window far below this.
  uint32_t max_open_chunks_per_rank = 1024;
  // Members of one job this server combines: a flat job's ranks, or a tree job's ranks and
  // downstream servers here. Per-job and per-chunk state grow with it.
  uint32_t max_fan_in = 8192;
  // This server is the root of an aggregation tree (its --topology entry has children): a job
  // wider than max_fan_in is a tree job from its first hello, even one from a rank of its own.
  bool tree_root = false;
  // The deployment secret (auth/secret.h). When set, every hello must prove it (auth/proof.h).
  std::string secret;
  // Without a secret the server refuses to listen beyond loopback unless this is set.
  bool insecure = false;
  // Threads that reduce chunks beside the event loop. -1: one per usable core but one;
  // 0: the event loop reduces every chunk itself.
  int reduce_threads = -1;
  // The share of a core that reductions must have needed lately before chunks go to those threads
  // (server/reduce_load.h): below it the loop reduces, which costs less than waking a thread.
  // 0: every chunk that qualifies goes to the threads.
  double reduce_offload_share = 0.2;
  // The rate of this server's port, bit/s each way, announced in every welcome (0: unknown).
  // Ranks stripe small collectives over more servers when ports are slow (client/plan.h).
  uint64_t link_rate_bits = 0;
  // Aggregation tree (docs/tree.md): the parent server. Each job's ranks here are combined into one
  // partial that joins the parent's job as one member; the parent's result is relayed back down.
  std::optional<transport::Endpoint> upstream;
};

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
  uint64_t reduce_threads = 0;
};

// The reduction server: serves many jobs at once on one event loop, which owns every job,
// connection and buffer; Run() starts the reduction workers, which only read and write chunk
// buffers the loop hands them. Thread-compatible: Run() on one thread, Stop() and stats() from any.
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
