// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optcast/types.h"

namespace optcast::tools {

struct BenchOptions {
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 64u << 20;
  uint64_t factor = 2;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  std::vector<std::string> algos{"server", "ring"};

  // Local mode: this many rank processes and servers on this machine.
  int nranks = 4;
  int nservers = 2;
  int io_threads = 0;       // lanes of each local server (0: the server's default)
  int reduce_threads = -1;  // reduction threads of each local server (-1: the server's default)
  std::string host = "127.0.0.1";
  // tcp or ofi; empty: OPTCAST_TRANSPORT, else tcp.
  std::string transport;

  // Use these servers instead of starting local ones.
  std::vector<std::string> servers;
  // Multi-host mode: this process is one rank.
  int rank = -1;
  std::string rendezvous;

  int timeout_ms = 30000;
  // Failover on a dead server (--no-failover turns it off, as OPTCAST_FAILOVER=0 does).
  bool failover = true;
  size_t chunk_bytes = 0;

  // What carries the server path: "client" (the C++ client library) or "nccl-plugin"
  // (libnccl-net-optcast.so's CollNet, driven as NCCL's proxy drives it; shown as algo "plugin").
  std::string through = "client";
  std::string plugin_path;                 // empty: FindPlugin's default
  // The type float32 travels in on the server path and through the plugin ("bf16", "fp16";
  // empty: OPTCAST_WIRE_DTYPE, else as it is). The ring always sends float32.
  std::string wire;
  size_t plugin_chunk_bytes = 512u << 10;  // NCCL's CollNet chunk: the size of each staged request
  int channels = 2;                        // NCCL channels sharing the one collComm
  int proxy_idle_us = 0;                   // 0: the driver yields when idle, as NCCL's proxy; else sleeps
  std::string json_path;
  // Rank 0 writes one line per timed iteration here (algo, bytes, iteration, wall-clock end in
  // seconds since the epoch, duration in microseconds, failovers so far): how long each
  // collective took around an event such as a server's death.
  std::string iteration_times_path;
  std::string plot_path;
  // Progress on stderr: on, off, or auto (on when stderr is a terminal).
  std::string progress = "auto";
  bool quiet = false;  // no table (the demo prints its own)
  // Local mode: the server processes, whose CPU time rank 0 reads from /proc.
  std::vector<int> server_pids;
};

struct BenchRow {
  std::string algo;
  uint64_t bytes = 0;
  uint64_t count = 0;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  uint64_t wrong = 0;
  // CPU time per AllReduce, in seconds: all servers together (negative: not measured) and all
  // ranks together.
  double server_cpu_s = -1;
  double client_cpu_s = 0;
};

}  // namespace optcast::tools
