// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/topology/topology_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "config/root_placement.h"
#include "config/topology.h"
#include "tools/topology/host_racks.h"
#include "tools/topology/tree_plan.h"

namespace optcast::tools::topology {
namespace {

struct Flags {
  std::string hosts;
  std::string output = "tree.yaml";
  std::string format = "auto";
  std::string rack_label = "topology.kubernetes.io/rack";
  int leaves = 1;
  int port = 8918;
  std::vector<std::string> spine_hosts;
};

Status ReadAll(const std::string& path, std::string* text) {
  if (path == "-") {
    *text = std::string(std::istreambuf_iterator<char>(std::cin), {});
    return Status::Ok();
  }
  std::ifstream f(path);
  if (!f)
    return InvalidArgument(
        fmt::format("cannot read the host list {}; give a readable file or - for standard input", path));
  *text = std::string(std::istreambuf_iterator<char>(f), {});
  return Status::Ok();
}

Status Run(const Flags& f) {
  HostListFormat format;
  OPTCAST_RETURN_IF_ERROR(ParseHostListFormat(f.format, &format));
  std::string text;
  OPTCAST_RETURN_IF_ERROR(ReadAll(f.hosts, &text));
  std::vector<HostRack> hosts;
  const std::string source = f.hosts == "-" ? "standard input" : f.hosts;
  OPTCAST_RETURN_IF_ERROR(ParseHostRacks(source, text, format, f.rack_label, &hosts));
  TreePlan plan;
  OPTCAST_RETURN_IF_ERROR(MakeTreePlan(hosts, TreePlanOptions{f.leaves, f.port, f.spine_hosts}, &plan));
  const std::string yaml = TopologyYaml(
      plan, fmt::format("written by optcast topology from {}: {} racks, {} leaf server(s) per rack, {} root(s)", source,
                        plan.racks.size(), f.leaves, plan.roots));
  {
    std::ofstream out(f.output);
    out << yaml;
    out.close();
    if (!out) return InternalError(fmt::format("cannot write {}", f.output));
  }
  // What the servers will read: the same checks, so the file is known to start.
  config::Topology topo;
  OPTCAST_RETURN_IF_ERROR(config::ReadTopology(f.output, &topo));
  for (const std::string& w : config::RootPlacementWarnings(topo)) std::fprintf(stderr, "warning: %s\n", w.c_str());
  for (const WorkerServers& w : plan.workers) {
    std::printf("%s OPTCAST_SERVERS=%s\n", w.host.c_str(), fmt::format("{}", fmt::join(w.servers, ",")).c_str());
  }
  std::fprintf(stderr,
               "wrote %s: %zu servers for %zu workers in %zu racks (%d leaf server(s) per rack, %d root(s) in %d "
               "rack(s)); start each with `optcast server --topology %s --name NAME` on the host of its address\n",
               f.output.c_str(), plan.servers.size(), plan.workers.size(), plan.racks.size(), f.leaves, plan.roots,
               plan.root_racks, f.output.c_str());
  return Status::Ok();
}

}  // namespace

std::function<int()> AddTopologyCommand(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "topology",
      "Write tree.yaml (aggregation trees, roots spread over racks) from a host-to-rack list and print each "
      "worker's OPTCAST_SERVERS");
  cmd->add_option("hosts", f->hosts,
                  "Host list: `host rack [server]` lines, SLURM_TOPOLOGY_ADDR paths, or `kubectl get nodes -o json` "
                  "(- reads standard input)")
      ->required();
  cmd->add_option("-o,--output", f->output, "Where to write the topology")->capture_default_str();
  cmd->add_option("--format", f->format, "auto, text, slurm or k8s")->capture_default_str();
  cmd->add_option("--rack-label", f->rack_label, "k8s: the node label that names a node's rack")->capture_default_str();
  cmd->add_option("--leaves-per-rack", f->leaves, "Leaf servers per rack: the number of trees (stripes)")
      ->capture_default_str();
  cmd->add_option("--port", f->port, "Port of the first server on a host (the next ones count up)")
      ->capture_default_str();
  cmd->add_option("--spine-hosts", f->spine_hosts, "Hosts on the spine for the roots (default: spread over the racks)")
      ->delimiter(',');
  return [f] {
    if (Status st = Run(*f); !st.ok()) {
      std::fprintf(stderr, "optcast topology: %s\n", st.message().c_str());
      return 2;
    }
    return 0;
  };
}

}  // namespace optcast::tools::topology
