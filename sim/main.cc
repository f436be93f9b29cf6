// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// optcast-sim: one simulated AllReduce on a SimGrid fat tree; prints one JSON object.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "sim/fabric.h"
#include "sim/models.h"
#include "sim/node.h"
#include "sim/sim_config.h"

namespace sg4 = simgrid::s4u;
using optcast::sim::Algo;

namespace {

// "64M", "1MiB", "65536" -> bytes.
bool ParseSize(const std::string& s, uint64_t* out) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    return false;
  }
  std::string unit = s.substr(pos);
  double mult = 1;
  if (unit == "" || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KiB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else
    return false;
  *out = static_cast<uint64_t>(v * mult);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  optcast::sim::SimConfig c;
  std::string algo = "ring", size = "64M", chunk = "0";
  double link_mbit = 200, latency_us = 50, reduce_gbs = 10, per_chunk_us = 0, payload_share = 1.0;
  CLI::App app{"Simulates one AllReduce (ring, reduction servers or an aggregation tree) on a fat tree"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // later flags override
  app.add_option("--algo", algo, "ring, servers or tree");
  app.add_option("--workers,-n", c.workers, "workers (ranks)");
  app.add_option("--servers,-m", c.servers, "flat: servers; tree: leaf servers per worker rack");
  app.add_option("--roots", c.roots, "tree: root servers");
  std::string root_placement = "spread";
  app.add_option("--root-placement", root_placement,
                 "tree: where roots sit: spread (root q in worker rack q mod racks), rack (all in racks of "
                 "their own) or spine (each on its own spine port)")
      ->capture_default_str();
  app.add_option("--bytes,-s", size, "AllReduce size, e.g. 64M");
  app.add_option("--link-mbit", link_mbit, "host link rate, Mbit/s each way");
  app.add_option("--payload-share", payload_share,
                 "share of the link rate that carries payload (TCP/IP/Ethernet overhead), e.g. 0.993");
  app.add_option("--latency-us", latency_us, "one-way host-to-host latency within a rack, microseconds");
  app.add_option("--rack-size", c.rack_size, "host ports per leaf switch");
  app.add_option("--oversub", c.oversub, "leaf switch oversubscription, host ports : uplink (1 = non-blocking)");
  app.add_option("--reduce-gbs", reduce_gbs, "server reduce rate, GB/s of input");
  app.add_option("--per-chunk-us", per_chunk_us, "fixed server cost per chunk contribution, microseconds");
  app.add_option("--chunk", chunk, "chunk size (0: the client's default)");
  app.add_option("--window", c.window, "chunks in flight per server link (0: the client's default)");
  app.add_option("--host-flows", c.host_flows, "most messages a host has on the wire at once");
  app.add_flag("--partials-first,!--partials-in-order", c.partials_first,
               "tree: leaf servers send partials to the root ahead of queued results for workers, as the "
               "server's own upstream connection does (the default); --partials-in-order: one queue, oldest first");
  app.add_option("--simulated-racks", c.simulated_racks,
                 "flat servers and trees: simulate only this many worker racks and fold the others onto them "
                 "(0: all; docs/scale.md, \"The fold\")");
  double server_delay_us = 0;
  app.add_option("--server-delay-us", server_delay_us,
                 "delay before a server's reduced chunk leaves, microseconds (emulated cluster: CPU wait)");
  std::vector<std::string> sg_cfg;
  app.add_option("--sg-cfg", sg_cfg, "extra SimGrid setting name:value (repeatable), e.g. maxmin/precision:1e-5")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI11_PARSE(app, argc, argv);
  c.server_delay_s = server_delay_us * 1e-6;

  optcast::Status st = optcast::sim::ParseAlgo(algo, &c.algo);
  if (st.ok()) st = optcast::sim::ParseRootPlacement(root_placement, &c.root_placement);
  if (st.ok() && !ParseSize(size, &c.bytes))
    st = optcast::InvalidArgument("--bytes '" + size + "': use e.g. 1M, 64MiB, 65536");
  if (st.ok() && !ParseSize(chunk, &c.chunk_bytes))
    st = optcast::InvalidArgument("--chunk '" + chunk + "': use e.g. 64K");
  c.link_bps = link_mbit * 1e6 / 8 * payload_share;
  c.latency_s = latency_us * 1e-6;
  c.reduce_bps = reduce_gbs * 1e9;
  c.per_chunk_s = per_chunk_us * 1e-6;
  if (st.ok() && (payload_share <= 0 || payload_share > 1))
    st = optcast::InvalidArgument("--payload-share must be in (0, 1]");
  if (st.ok()) st = c.Validate();
  if (!st.ok()) {
    std::fprintf(stderr, "optcast-sim: %s\n", st.message().c_str());
    return 2;
  }

  // CM02 without cross traffic: bandwidth shared max-min fairly, latency added per link, no
  // acknowledgement traffic in the reverse direction (payload_share accounts for headers).
  int sg_argc = 2;
  char name[] = "optcast-sim";
  char quiet[] = "--log=root.thres:warning";
  char* sg_argv[] = {name, quiet, nullptr};
  sg4::Engine engine(&sg_argc, sg_argv);
  engine.set_config("network/model:CM02");
  engine.set_config("network/crosstraffic:0");
  engine.set_config("network/TCP-gamma:0");  // no window-over-RTT cap: links are the limit
  engine.set_config("network/maxmin-selective-update:1");
  for (const std::string& kv : sg_cfg) engine.set_config(kv);

  optcast::sim::Fabric fabric = optcast::sim::BuildFabric(engine, c);
  optcast::sim::Run run;
  switch (c.algo) {
    case Algo::kRing: SpawnRing(c, fabric, &run); break;
    case Algo::kServers: SpawnServers(c, fabric, &run); break;
    case Algo::kTree: SpawnTree(c, fabric, &run); break;
  }
  for (auto& node : run.nodes) {
    optcast::sim::Node* n = node.get();
    n->set_timer(fabric.timer);
    sg4::ActorPtr actor = sg4::Actor::create(n->mailbox()->get_name(), n->host(), [n] { n->Run(); });
    n->mailbox()->set_receiver(actor);
  }
  engine.run();

  const double t = *std::max_element(run.worker_done_s.begin(), run.worker_done_s.end());
  nlohmann::json out = {
      {"algo", algo},
      {"workers", c.workers},
      {"servers", c.algo == Algo::kRing ? 0 : c.servers},
      {"roots", c.algo == Algo::kTree ? c.roots : 0},
      {"root_placement", c.algo == Algo::kTree ? optcast::sim::RootPlacementName(c.root_placement) : ""},
      {"partials_first", c.algo == Algo::kTree && c.partials_first},
      {"simulated_racks", c.Folded() ? c.simulated_racks : c.WorkerRacks()},
      {"stripes", run.stripes},
      {"chunk_bytes", run.chunk_bytes},
      {"bytes", c.bytes},
      {"link_bps", c.link_bps},
      {"latency_s", c.latency_s},
      {"rack_size", c.rack_size},
      {"oversub", c.oversub},
      {"server_delay_s", c.server_delay_s},
      {"uplink_bps", fabric.uplink_bps},
      {"time_s", t},
      {"algbw_Bps", static_cast<double>(c.bytes) / t},
      {"algbw_over_link", static_cast<double>(c.bytes) / t / c.link_bps},
      {"messages", optcast::sim::Node::messages()},
      {"wakeups", optcast::sim::Node::wakeups()},
      // CPU time of this process, what the run cost whatever else the machine was doing.
      {"cpu_s", static_cast<double>(std::clock()) / CLOCKS_PER_SEC},
  };
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
