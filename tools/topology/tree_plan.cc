// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/topology/tree_plan.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <sstream>

#include "config/root_placement.h"

namespace optcast::tools::topology {
namespace {

struct Rack {
  std::vector<std::string> hosts;         // every host, in order
  std::vector<std::string> server_hosts;  // where its servers run
};

}  // namespace

Status MakeTreePlan(const std::vector<HostRack>& hosts, const TreePlanOptions& opts, TreePlan* out) {
  *out = TreePlan{};
  if (opts.leaves < 1) return InvalidArgument(fmt::format("--leaves-per-rack {}: need at least 1", opts.leaves));
  if (opts.port < 1 || opts.port > 65535) return InvalidArgument(fmt::format("--port {}: not a port", opts.port));
  std::map<std::string, Rack> racks;
  for (const HostRack& h : hosts) {
    if (h.rack == config::kSpineRack) {
      return InvalidArgument(
          fmt::format("host '{}' is in a rack named '{}', which tree.yaml keeps for roots on the "
                      "spine; rename the rack",
                      h.host, config::kSpineRack));
    }
    if (!racks.count(h.rack)) out->racks.push_back(h.rack);
    Rack& r = racks[h.rack];
    r.hosts.push_back(h.host);
    if (h.server_only) r.server_hosts.push_back(h.host);
  }
  std::map<std::string, int> servers_on;  // servers placed on each host so far
  auto place = [&](const std::string& host) { return opts.port + servers_on[host]++; };
  for (const std::string& name : out->racks) {
    Rack& r = racks[name];
    if (r.server_hosts.empty()) r.server_hosts = r.hosts;  // beside the ranks
  }
  const bool tree = out->racks.size() > 1;
  for (const std::string& name : out->racks) {
    const Rack& r = racks[name];
    for (int j = 0; j < opts.leaves; ++j) {
      const std::string& host = r.server_hosts[j % r.server_hosts.size()];
      out->servers.push_back(PlannedServer{fmt::format("leaf-{}-{}", name, j), host, place(host), name,
                                           tree ? fmt::format("root-{}", j) : ""});
    }
  }
  if (tree) {
    std::set<std::string> root_racks;
    for (int j = 0; j < opts.leaves; ++j) {
      std::string host, rack;
      if (!opts.spine_hosts.empty()) {
        host = opts.spine_hosts[j % opts.spine_hosts.size()];
        rack = config::kSpineRack;
      } else {
        rack = out->racks[j % out->racks.size()];
        const Rack& r = racks[rack];
        // Past the rack's leaves first: a root beside a leaf would share that leaf's port.
        const size_t nth = opts.leaves + j / out->racks.size();
        host = r.server_hosts[nth % r.server_hosts.size()];
      }
      root_racks.insert(rack);
      out->servers.push_back(PlannedServer{fmt::format("root-{}", j), host, place(host), rack, ""});
    }
    out->roots = opts.leaves;
    out->root_racks = static_cast<int>(root_racks.size());
  }
  std::map<std::string, std::vector<std::string>> leaves_of;
  for (const PlannedServer& s : out->servers) {
    if (s.name.rfind("leaf-", 0) == 0) leaves_of[s.rack].push_back(fmt::format("{}:{}", s.host, s.port));
  }
  for (const HostRack& h : hosts) {
    if (!h.server_only) out->workers.push_back(WorkerServers{h.host, leaves_of[h.rack]});
  }
  if (out->workers.empty()) return InvalidArgument("every host is marked `server`: list the hosts that run ranks too");
  return Status::Ok();
}

std::string TopologyYaml(const TreePlan& plan, const std::string& comment) {
  YAML::Emitter y;
  if (!comment.empty()) y << YAML::Comment(comment) << YAML::Newline;
  y << YAML::BeginMap << YAML::Key << "servers" << YAML::Value << YAML::BeginSeq;
  for (const PlannedServer& s : plan.servers) {
    y << YAML::BeginMap;
    y << YAML::Key << "name" << YAML::Value << s.name;
    y << YAML::Key << "address" << YAML::Value << fmt::format("{}:{}", s.host, s.port);
    y << YAML::Key << "rack" << YAML::Value << s.rack;
    if (!s.parent.empty()) y << YAML::Key << "parent" << YAML::Value << s.parent;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

}  // namespace optcast::tools::topology
