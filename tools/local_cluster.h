// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "optcast/status.h"
#include "transport/kind.h"

namespace optcast::tools {

// Reduction servers and rank processes on this machine, as child processes of the caller.
class LocalCluster {
 public:
  ~LocalCluster();

  // Starts `count` servers on `host`, each on a free port with `io_threads` lanes (0: the
  // server's default) and `reduce_threads` reduction threads (-1: the server's default); fills
  // `addresses` ("host:port").
  Status StartServers(int count, const std::string& host, std::vector<std::string>* addresses,
                      transport::Kind transport = transport::Kind::kTcp, int io_threads = 0, int reduce_threads = -1);
  // Runs body(rank) in `nranks` child processes; returns when all exit. Fails if any exits non-zero
  // or if they outlive `limit` (then all are killed).
  Status RunRanks(int nranks, const std::function<int(int rank)>& body, std::chrono::seconds limit);
  // Peak resident set size of each server process so far (from /proc), in bytes.
  std::vector<uint64_t> ServerPeakRss() const;
  const std::vector<pid_t>& server_pids() const { return servers_; }
  void StopServers();

 private:
  std::vector<pid_t> servers_;
};

}  // namespace optcast::tools
