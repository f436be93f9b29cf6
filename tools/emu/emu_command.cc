// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/emu/emu_command.h"

#include <cstdio>
#include <memory>
#include <string>

#include "common/env.h"
#include "tools/emu/cluster.h"
#include "tools/emu/emu_run.h"
#include "transport/posix/traffic_class.h"

namespace optcast::tools {

namespace {

struct EmuFlags {
  emu::RunOptions run;
  std::string rate = "500mbit";
  std::string min_bytes = "1M";
  std::string max_bytes = "64M";
  std::string host_queue = "fair";
  std::string priority_dscp = "46";
  std::string uplink;
  bool verbose = false;
};

void AddClusterFlags(CLI::App* cmd, EmuFlags* f) {
  cmd->add_option("--workers", f->run.spec.workers, "Worker hosts (one rank each)")
      ->capture_default_str()
      ->check(CLI::Range(1, emu::kMaxWorkers));
  cmd->add_option("--servers", f->run.spec.servers, "Reduction server hosts")
      ->capture_default_str()
      ->check(CLI::Range(0, emu::kMaxServers));
  cmd->add_option("--rate", f->rate, "Link rate per host and direction (e.g. 200mbit, 1gbit)")->capture_default_str();
  cmd->add_option("--mtu", f->run.spec.mtu, "Link MTU in bytes (9000: jumbo frames, as training fabrics use)")
      ->capture_default_str()
      ->check(CLI::Range(576, 65000));
  cmd->add_option("--tcp-cc", f->run.spec.tcp_cc,
                  "TCP congestion control of every host: bbr, cubic or reno "
                  "(default: the machine's)");
  cmd->add_option("--queue-packets", f->run.spec.queue_packets,
                  "Packets each switch port queues towards its host (default: the device's 1000)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--burst", f->run.spec.burst_bytes,
                  "HTB burst of every link, bytes: what a link idle for a while may send at once, faster than its "
                  "rate (default: 1 ms at line rate, at least 16 frames)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  cmd->add_option("--host-queue", f->host_queue,
                  "Each host's NIC queue: fair (per destination, as Linux's default fq_codel) or fifo")
      ->capture_default_str()
      ->check(CLI::IsMember({"fair", "fifo"}));
  cmd->add_option("--priority-dscp", f->priority_dscp,
                  "The DSCP that switch ports and host queues serve first, 0-63 or off (every port one FIFO); `run` "
                  "has its servers and ranks mark latency-bound collectives with it unless OPTCAST_LATENCY_DSCP is "
                  "set")
      ->capture_default_str();
  cmd->add_option("--racks", f->run.spec.racks,
                  "Racks of workers (workers / racks each), each behind a rack switch whose uplink to a spine is "
                  "limited to --uplink; flat servers get racks of their own, a tree's leaves sit in their rack")
      ->check(CLI::Range(1, emu::kMaxRacks));
  cmd->add_option("--uplink", f->uplink,
                  "Rate of each rack's uplink to the spine, each way (e.g. 200mbit; with 4 workers per rack at "
                  "200mbit that is 4:1 oversubscribed)");
  cmd->add_flag("-v,--verbose", f->verbose, "Print every ip/tc command and process started");
}

// Turns the textual flags into numbers; false (with a message) when one is malformed.
bool Resolve(EmuFlags* f, bool sizes) {
  auto rate = ParseBitRate(f->rate);
  if (!rate) {
    std::fprintf(stderr, "optcast emu: --rate '%s' is not a rate like 500mbit or 1gbit (100kbit..1000gbit)\n",
                 f->rate.c_str());
    return false;
  }
  f->run.spec.rate_bits = *rate;
  if (!f->uplink.empty()) {
    auto uplink = ParseBitRate(f->uplink);
    if (!uplink) {
      std::fprintf(stderr, "optcast emu: --uplink '%s' is not a rate like 200mbit or 1gbit (100kbit..1000gbit)\n",
                   f->uplink.c_str());
      return false;
    }
    f->run.spec.uplink_bits = *uplink;
  }
  if (f->run.spec.racks > 0 && f->uplink.empty()) {
    std::fprintf(stderr,
                 "optcast emu: --racks needs --uplink RATE, the rate of each rack's uplink to the spine (e.g. the "
                 "link rate times the workers per rack for a non-blocking fabric, a quarter of that for 4:1)\n");
    return false;
  }
  if (!f->run.server_link_rate.empty() && f->run.server_link_rate != "unknown" &&
      !ParseBitRate(f->run.server_link_rate)) {
    std::fprintf(stderr, "optcast emu: --server-link-rate '%s' is not a rate like 100mbit or 'unknown'\n",
                 f->run.server_link_rate.c_str());
    return false;
  }
  f->run.spec.host_queue = *emu::ParseHostQueue(f->host_queue);  // CLI11 checked the name
  if (Status st = transport::posix::ParseDscp(f->priority_dscp, "--priority-dscp", &f->run.spec.priority_dscp);
      !st.ok()) {
    std::fprintf(stderr, "optcast emu: %s\n", st.message().c_str());
    return false;
  }
  f->run.verbose = f->verbose;
  if (sizes) {
    auto lo = ParseByteSize(f->min_bytes);
    auto hi = ParseByteSize(f->max_bytes);
    if (!lo || !hi) {
      std::fprintf(stderr, "optcast emu: sizes must look like 64K, 1M or 1G\n");
      return false;
    }
    f->run.min_bytes = *lo;
    f->run.max_bytes = *hi;
  }
  return true;
}

int Check(const Status& st) {
  if (st.ok()) return 0;
  std::fprintf(stderr, "optcast emu: %s\n", st.message().c_str());
  return 1;
}

}  // namespace

std::function<int()> AddEmuCommand(CLI::App& app) {
  auto flags = std::make_shared<EmuFlags>();
  CLI::App* cmd = app.add_subcommand(
      "emu", "Emulated cluster on this machine: one network namespace per host, rate-limited links (needs root)");
  cmd->require_subcommand(1);

  CLI::App* up = cmd->add_subcommand("up", "Create the hosts and links (clears an earlier cluster first)");
  AddClusterFlags(up, flags.get());

  CLI::App* run = cmd->add_subcommand(
      "run", "up, then run reduction servers, the Optcast ring and Gloo on the hosts, print one table, then down");
  AddClusterFlags(run, flags.get());
  run->add_option("-b,--minbytes", flags->min_bytes, "Smallest size")->capture_default_str();
  run->add_option("-e,--maxbytes", flags->max_bytes, "Largest size")->capture_default_str();
  run->add_option("-f,--stepfactor", flags->run.factor, "Multiply the size by this each step")->capture_default_str();
  run->add_option("-n,--iters", flags->run.iters, "Timed iterations per size")->capture_default_str();
  run->add_option("-w,--warmup_iters", flags->run.warmup, "Untimed iterations per size")->capture_default_str();
  run->add_option("--algo", flags->run.algos,
                  "Algorithms: server, plugin (server through the NCCL plugin), ring, gloo, server-bf16 (float32 "
                  "on a bfloat16 wire), ring-bf16 (the ring over bfloat16 data) (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  run->add_option("--chunk", flags->run.chunk, "Chunk size for the server path (default: automatic)");
  run->add_option("--server-link-rate", flags->run.server_link_rate,
                  "The port rate the servers announce to the ranks (`optcast server --link-rate`: a rate, or "
                  "'unknown'; default: --rate)");
  run->add_option("--proxy-idle-us", flags->run.proxy_idle_us,
                  "Algorithm plugin: the NCCL driver sleeps this long when a pass finds nothing to do (0: it "
                  "yields, as NCCL's proxy does on a core of its own; the emulated hosts share this machine's cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  run->add_option("--json", flags->run.json_path, "Write the combined results as JSON to this file");
  run->add_option("--plot", flags->run.plot_path, "Draw algbw against size as a PNG (needs gnuplot)");
  run->add_option("--gloo-bench", flags->run.gloo_binary,
                  "Path of optcast-gloo-bench (default: next to optcast, $OPTCAST_GLOO_BENCH, or PATH)");
  run->add_option("--optcast", flags->run.optcast_binary, "optcast binary to run on the hosts (default: this one)");
  run->add_flag("--keep-logs", flags->run.keep_logs, "Keep the per-process logs even when all went well");
  run->add_flag("--tree", flags->run.tree,
                "Servers form an aggregation tree: server 0 is the root, the others leaves; each worker talks to "
                "one leaf (needs --servers >= 2)");
  run->add_option("--tree-depth", flags->run.tree_depth,
                  "Levels of the tree (implies --tree): 2, a root and leaves; 3, a root, inner servers and leaves "
                  "(needs --servers >= 3)")
      ->check(CLI::Range(2, 3))
      ->each([flags](const std::string&) { flags->run.tree = true; });
  run->add_flag("--check-types", flags->run.check_types,
                "After the timed runs, run every datatype and op once through the servers at the smallest size, "
                "checking each result");

  CLI::App* down = cmd->add_subcommand("down", "Stop everything in the cluster and delete it (idempotent)");
  down->add_flag("-v,--verbose", flags->verbose, "Print every command");
  cmd->add_subcommand("status", "List the hosts of the current cluster");

  return [flags, cmd] {
    const std::string sub = cmd->get_subcommands().front()->get_name();
    if (Status st = emu::CheckPrivileges(); !st.ok()) return Check(st);
    if (sub == "up") {
      if (!Resolve(flags.get(), false)) return 2;
      if (int rc = Check(emu::Up(flags->run.spec, flags->verbose)); rc != 0) return rc;
      std::string text;
      if (int rc = Check(emu::Describe(&text)); rc != 0) return rc;
      std::printf("%s", text.c_str());
      return 0;
    }
    if (sub == "run") {
      if (!Resolve(flags.get(), true)) return 2;
      return emu::RunEmulation(flags->run);
    }
    if (sub == "down") return Check(emu::Down(flags->verbose));
    std::string text;
    if (int rc = Check(emu::Describe(&text)); rc != 0) return rc;
    std::printf("%s", text.c_str());
    return 0;
  };
}

}  // namespace optcast::tools
