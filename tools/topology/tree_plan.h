// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The aggregation trees for a list of hosts in racks (docs/tree.md, "Writing tree.yaml"):
// `leaves` leaf servers in every rack, and one root per tree, tree j being leaf j of every rack.
// Root j sits in rack j mod racks, so that each rack's uplink carries the partials of its own
// roots' stripes only (docs/scale.md, "Root placement"), or on a spine host when some are given.
// Servers run on a rack's server-only hosts if it has any, else on its first hosts beside the
// ranks; a root prefers a host that runs no leaf. A host with several servers gets consecutive ports.

#include <string>
#include <vector>

#include "optcast/status.h"
#include "tools/topology/host_racks.h"

namespace optcast::tools::topology {

struct TreePlanOptions {
  int leaves = 1;                        // leaf servers per rack (= trees = stripes)
  int port = 8918;                       // first port on each host
  std::vector<std::string> spine_hosts;  // roots go here (rack "spine") when not empty
};

struct PlannedServer {
  std::string name;
  std::string host;
  int port = 0;
  std::string rack;
  std::string parent;  // "" for a root (or for the leaves of a one-rack job: flat servers)
};

struct WorkerServers {
  std::string host;
  std::vector<std::string> servers;  // host:port of its rack's leaves, tree 0 first
};

struct TreePlan {
  std::vector<std::string> racks;  // in order of first appearance
  std::vector<PlannedServer> servers;
  std::vector<WorkerServers> workers;
  int roots = 0;
  int root_racks = 0;  // distinct racks (or the spine) that hold roots
};

// Fails, naming the fix, on no workers or leaves < 1.
Status MakeTreePlan(const std::vector<HostRack>& hosts, const TreePlanOptions& opts, TreePlan* out);

// The plan as a tree.yaml for `optcast server --topology` (config/topology.h).
std::string TopologyYaml(const TreePlan& plan, const std::string& comment);

}  // namespace optcast::tools::topology
