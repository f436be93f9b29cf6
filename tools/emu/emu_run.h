// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/emu/cluster.h"

namespace optcast::tools::emu {

struct RunOptions {
  ClusterSpec spec;
  uint64_t min_bytes = 1u << 20;
  uint64_t max_bytes = 64u << 20;
  uint64_t factor = 4;
  // As `optcast bench` (and nccl-tests): steady state. A job's first collectives of a size pay
  // for fresh memory (the copies failover keeps), which on a virtual machine whose memory the host
  // reclaims costs ~10 ms per 2 MiB: with 2 warm-up iterations the first 1 MiB ones read half
  // their steady speed (docs/benchmarks.md, "The first collectives of a size").
  int iters = 20;
  int warmup = 5;
  std::vector<std::string> algos{"server", "ring", "gloo"};
  std::string chunk;  // passed to `optcast bench --chunk` when set
  // What the servers announce as their port rate (`optcast server --link-rate`); empty: the
  // emulated links' rate.
  std::string server_link_rate;
  // The plugin's driver sleeps this long when idle instead of yielding (`optcast bench
  // --proxy-idle-us`): NCCL's proxy spins on a core of its own on a real host, while here every
  // emulated host shares the machine's few cores with the emulated links.
  int proxy_idle_us = 50;
  std::string optcast_binary;  // default: this executable
  std::string gloo_binary;     // default: found next to this executable or in PATH
  std::string json_path;
  std::string plot_path;
  bool keep_logs = false;
  // Aggregation tree (docs/tree.md) of tree_depth levels (tools/emu/tree_layout.h): server 0 is
  // the root; each worker talks only to its leaf.
  bool tree = false;
  int tree_depth = 2;
  // After the timed runs, every datatype x op once through the servers at the smallest size, each
  // result checked (the timed runs use float32 sum).
  bool check_types = false;
  bool verbose = false;
};

// Brings the cluster up, starts a server per server host, runs every algorithm at every size with
// one rank per worker host (one set of rank processes per algorithm and size, so that the CPU
// use of each can be measured), prints the combined table, writes JSON/PNG, and takes the
// cluster down again whatever happened. Returns a process exit code.
int RunEmulation(const RunOptions& opts);

// Where optcast-gloo-bench is: `hint` if given, else $OPTCAST_GLOO_BENCH, next to this
// executable (build tree: ./gloo/, install: same dir), or in PATH. Empty when not found.
std::string FindGlooBench(const std::string& hint);

}  // namespace optcast::tools::emu
