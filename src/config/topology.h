// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// An aggregation tree described in a YAML file (docs/tree.md), read with yaml-cpp:
//
//   servers:
//     - name: spine          # the root: no parent
//       address: 10.0.0.1:8918
//     - name: rack-a
//       address: 10.0.1.1:8918
//       pod: pod-1           # rack and pod are labels for people and tools
//       rack: a
//       parent: spine
//
// Each server is started with the file and its own name; its parent's address is its upstream.

#include <string>
#include <vector>

#include "optcast/status.h"
#include "transport/endpoint.h"

namespace optcast::config {

struct TopologyServer {
  std::string name;
  transport::Endpoint address;
  std::string rack;
  std::string pod;
  std::string parent;  // "" for a root
  int line = 0;
};

struct Topology {
  std::string path;
  std::vector<TopologyServer> servers;

  const TopologyServer* Find(const std::string& name) const;
  // Servers between `name` and its root, the root included (0 for a root).
  int Depth(const std::string& name) const;
  // Names of the servers whose parent is `name`.
  std::vector<std::string> Children(const std::string& name) const;
};

// Reads and checks the file: every server has a unique name and an address, every parent names a
// server of the file, and parent links form trees (no cycles). Errors name the file and line.
Status ReadTopology(const std::string& path, Topology* out);

}  // namespace optcast::config
