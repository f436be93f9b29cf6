// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// An aggregation tree of reduction servers on loopback, each on its own thread of the test
// process: node i forwards to node parent[i] (-1: a root).

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "optcast/status.h"
#include "server/server.h"

namespace optcast::tree {

class TreeFarm {
 public:
  TreeFarm() = default;
  // Whether Start marks a root with children as `--topology` does (one lane); false starts it
  // as a plain server that its children name with `--upstream`.
  bool mark_roots = true;
  ~TreeFarm();
  TreeFarm(const TreeFarm&) = delete;
  TreeFarm& operator=(const TreeFarm&) = delete;

  // Starts every node, parents before their children (a child needs its parent's port).
  Status Start(const std::vector<int>& parent, const server::ServerOptions& base);
  std::string address(int node) const;
  server::Server& server(int node) { return *servers_[node]; }
  // Ends a server abruptly: its loop stops and every socket it holds closes, as when its process dies.
  void Kill(int node);
  void StopAll();

 private:
  std::vector<std::unique_ptr<server::Server>> servers_;
  std::vector<std::thread> threads_;
};

}  // namespace optcast::tree
