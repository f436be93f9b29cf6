// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tools/bench_command.h"
#include "tools/commands.h"
#include "tools/emu/emu_run.h"

namespace optcast::tools {

std::function<int()> AddDemoCommand(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  opts->nranks = 4;
  opts->nservers = 2;
  opts->min_bytes = 16;
  opts->max_bytes = 64u << 20;
  opts->factor = 4;
  opts->iters = 10;
  opts->warmup = 3;
  CLI::App* cmd = app.add_subcommand("demo",
                                     "Start a small cluster on this machine (servers and ranks) and compare "
                                     "the reduction servers with a ring AllReduce");
  cmd->add_option("--nranks", opts->nranks, "Rank processes")->capture_default_str();
  cmd->add_option("--nservers", opts->nservers, "Reduction servers")->capture_default_str();
  cmd->add_option("-n,--iters", opts->iters, "Timed iterations per size")->capture_default_str();
  auto loopback = std::make_shared<bool>(false);
  auto rate = std::make_shared<std::string>("200mbit");
  cmd->add_flag("--loopback", *loopback, "Skip the emulated network even when running as root");
  cmd->add_option("--rate", *rate, "Link rate of the emulated network")->capture_default_str();
  return [opts, loopback, rate] {
    if (!*loopback && geteuid() == 0) {
      // As root: a rate-limited emulated network, where the servers' halved traffic shows.
      emu::RunOptions ro;
      ro.spec.workers = opts->nranks;
      ro.spec.servers = opts->nservers == 2 ? opts->nranks : opts->nservers;
      auto bits = ParseBitRate(*rate);
      if (!bits) {
        std::fprintf(stderr, "optcast demo: --rate '%s' is not a rate like 200mbit\n", rate->c_str());
        return 2;
      }
      ro.spec.rate_bits = *bits;
      ro.min_bytes = 1u << 20;
      ro.max_bytes = 16u << 20;
      ro.factor = 4;
      ro.iters = 3;
      ro.warmup = 1;
      // One more row: the server path with float32 on a bfloat16 wire (docs/wire-dtype.md).
      ro.algos = {"server", "server-bf16", "ring", "gloo"};
      std::printf(
          "# optcast demo: emulated cluster (running as root): %d worker hosts and %d server hosts, each in "
          "its own network namespace on a %s link\n\n",
          ro.spec.workers, ro.spec.servers, rate->c_str());
      std::fflush(stdout);
      int rc = emu::RunEmulation(ro);
      if (rc == 0) return 0;
      std::printf("\n# the emulated cluster failed (see above); falling back to loopback\n\n");
    }
    BenchOptions o = *opts;
    o.algos = {"server", "server-bf16", "ring"};
    char path[] = "/tmp/optcast-demo-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
      std::perror("optcast demo: mkstemp");
      return 1;
    }
    close(fd);
    o.json_path = path;
    std::printf(
        "# optcast demo: loopback (%s): %d ranks and %d reduction servers as processes on this machine\n"
        "# (no rate-limited network here: both algorithms are bound by this machine's CPUs and memory)\n\n",
        *loopback ? "--loopback given" : "not root, so no emulated network", o.nranks, o.nservers);
    std::fflush(stdout);
    int rc = RunBench(o);
    std::ifstream in(path);
    nlohmann::json j;
    try {
      in >> j;
    } catch (...) {
      rc = rc ? rc : 1;
    }
    unlink(path);
    if (rc != 0) return rc;
    std::map<std::string, nlohmann::json> smallest, largest;
    for (const auto& r : j["results"]) {
      const std::string a = r["algo"];
      if (!smallest.count(a) || r["bytes"] < smallest[a]["bytes"]) smallest[a] = r;
      if (!largest.count(a) || r["bytes"] > largest[a]["bytes"]) largest[a] = r;
    }
    if (smallest.count("server") && smallest.count("ring")) {
      const double s_lat = smallest["server"]["time_us"], r_lat = smallest["ring"]["time_us"];
      const double s_bw = largest["server"]["algbw_gbps"], r_bw = largest["ring"]["algbw_gbps"];
      std::printf(
          "\nSummary: at %llu B the reduction servers take %.1f us against the ring's %.1f us (%.2fx); at "
          "%llu MiB they reach %.2f GB/s against the ring's %.2f GB/s (%.2fx). All results checked: %s.\n",
          static_cast<unsigned long long>(smallest["server"]["bytes"]), s_lat, r_lat, r_lat / s_lat,
          static_cast<unsigned long long>(largest["server"]["bytes"].get<uint64_t>() >> 20), s_bw, r_bw, s_bw / r_bw,
          "0 wrong");
    }
    return 0;
  };
}

}  // namespace optcast::tools
