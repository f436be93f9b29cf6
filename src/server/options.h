// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "transport/endpoint.h"
#include "transport/options.h"
#include "transport/traffic_class.h"
#include "wire/protocol.h"

namespace optcast::server {

// How a reduction server runs: what it listens on, its limits, its place in a tree. Its own
// header so that the server's parts can take it without the Server they make up.
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
  // Lanes: event loops, each with its own connections, jobs, buffers and reduce workers; a rank
  // joins every lane, so a server of k lanes serves like k servers behind one port
  // (server/lane.h). 0 or less: half the usable cores, 1 to 8 (server.cc, DefaultLanes). A server
  // in an aggregation tree, or over ofi, runs one.
  int io_threads = 0;
  // Threads that reduce chunks beside the event loops, over all lanes (each gets its share).
  // -1: one per usable core but one per lane; 0: the event loops reduce every chunk themselves.
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

}  // namespace optcast::server
