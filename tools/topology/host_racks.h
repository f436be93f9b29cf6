// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Which rack each host sits in, read from what clusters already have:
//   text:  one `host rack` per line, optionally `host rack server` for a host that runs only
//          reduction servers (no rank); `#` starts a comment;
//   slurm: one SLURM_TOPOLOGY_ADDR path per line (`spine.leaf03.node017`, as Slurm's topology/tree
//          plugin gives each node): the host is the last part, its rack the switch before it;
//   k8s:   `kubectl get nodes -o json`: items[].metadata.name and the node label `rack_label`.

#include <string>
#include <vector>

#include "optcast/status.h"

namespace optcast::tools::topology {

struct HostRack {
  std::string host;
  std::string rack;
  bool server_only = false;  // runs reduction servers, no rank
  int line = 0;              // where it was read (text and slurm), for messages
};

enum class HostListFormat { kAuto, kText, kSlurm, kKubernetes };
Status ParseHostListFormat(const std::string& s, HostListFormat* out);

// Parses `text` (read from `source`, which names it in errors). kAuto: JSON if it starts with
// '{', Slurm paths if every line is one dotted word, else text. Hosts must be unique.
Status ParseHostRacks(const std::string& source, const std::string& text, HostListFormat format,
                      const std::string& rack_label, std::vector<HostRack>* out);

}  // namespace optcast::tools::topology
