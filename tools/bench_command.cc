// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/bench_command.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>

#include "bootstrap/rendezvous.h"
#include "common/env.h"
#include "optcast/communicator.h"
#include "tools/bench_rank.h"
#include "tools/commands.h"
#include "tools/local_cluster.h"
#include "tools/nccl_driver/collnet_plugin.h"
#include "transport/kind.h"

namespace optcast::tools {

namespace {

// Rank and size from our flags, our environment, or the launcher's (Open MPI, MPICH/PMI, Slurm).
bool RankFromEnvironment(int* rank, int* nranks) {
  const char* pairs[][2] = {{"OPTCAST_RANK", "OPTCAST_NRANKS"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"},
                            {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (auto& p : pairs) {
    auto r = GetEnv(p[0]);
    auto n = GetEnv(p[1]);
    if (r && n) {
      *rank = std::atoi(r->c_str());
      *nranks = std::atoi(n->c_str());
      return true;
    }
  }
  return false;
}

}  // namespace

int RunBench(BenchOptions opts) {
  signal(SIGPIPE, SIG_IGN);
  if (opts.min_bytes == 0 || opts.max_bytes < opts.min_bytes || opts.factor < 1 || opts.iters < 1 || opts.warmup < 0) {
    std::fprintf(stderr, "optcast bench: need 0 < -b <= -e, -f >= 1, -n >= 1, -w >= 0\n");
    return 2;
  }
  if (opts.servers.empty()) {
    if (auto env = GetEnv("OPTCAST_SERVERS")) {
      std::vector<transport::Endpoint> eps;
      if (!transport::ParseEndpointList(*env, &eps, 8918).ok()) {
        std::fprintf(stderr, "optcast bench: OPTCAST_SERVERS='%s' is not HOST:PORT[,HOST:PORT...]\n", env->c_str());
        return 2;
      }
      for (auto& e : eps) opts.servers.push_back(e.ToString());
    }
  }
  if (opts.through == "nccl-plugin") {
    // The server path goes through the plugin instead of the client library.
    for (auto& a : opts.algos) {
      if (a == "server") a = "plugin";
    }
  }
  auto wants = [&](const char* algo) {
    return std::find(opts.algos.begin(), opts.algos.end(), algo) != opts.algos.end();
  };
  if (wants("plugin")) {
    // Found here, before any rank starts, so that a missing plugin is one clear error.
    if (Status st = nccl_driver::FindPlugin(opts.plugin_path, &opts.plugin_path); !st.ok()) {
      std::fprintf(stderr, "optcast bench: %s\n", st.message().c_str());
      return 2;
    }
    if (opts.op == RedOp::kAvg) {
      std::fprintf(stderr,
                   "optcast bench: NCCL never hands avg to a CollNet plugin (it sums through CollNet and divides on "
                   "the GPU); use -o sum for the plugin path\n");
      return 2;
    }
    if (IsBitwise(opts.op)) {
      std::fprintf(stderr,
                   "optcast bench: NCCL has no bitwise reductions, so it never hands %s to a CollNet plugin; "
                   "use --algo server,ring for -o %s\n",
                   RedOpName(opts.op), RedOpName(opts.op));
      return 2;
    }
    if (opts.channels < 1 || opts.plugin_chunk_bytes == 0) {
      std::fprintf(stderr, "optcast bench: need --channels >= 1 and --plugin-chunk > 0\n");
      return 2;
    }
  }
  const bool wants_server = wants("server") || wants("plugin") || wants("server-bf16");

  int env_rank = -1, env_nranks = 0;
  const bool rank_mode = opts.rank >= 0 || RankFromEnvironment(&env_rank, &env_nranks);
  if (rank_mode) {
    // Multi-host: this process is one rank; the others are started elsewhere.
    if (opts.rank < 0) {
      opts.rank = env_rank;
      opts.nranks = env_nranks;
    }
    if (opts.rendezvous.empty()) opts.rendezvous = GetEnv("OPTCAST_RENDEZVOUS").value_or("");
    if (opts.rendezvous.empty()) {
      std::fprintf(stderr,
                   "optcast bench: rank %d needs --rendezvous HOST:PORT (or OPTCAST_RENDEZVOUS): rank 0 "
                   "listens there and the others connect\n",
                   opts.rank);
      return 2;
    }
    if (wants_server && opts.servers.empty()) {
      std::fprintf(stderr,
                   "optcast bench: --algo server and --through nccl-plugin need --servers HOST:PORT[,...] (or "
                   "OPTCAST_SERVERS)\n");
      return 2;
    }
    transport::Endpoint ep;
    if (Status st = transport::ParseEndpoint(opts.rendezvous, &ep); !st.ok()) {
      std::fprintf(stderr, "optcast bench: --rendezvous: %s\n", st.message().c_str());
      return 2;
    }
    std::unique_ptr<bootstrap::Rendezvous> rv;
    Status st = bootstrap::Rendezvous::Create(ep, opts.rank, opts.nranks,
                                              std::chrono::milliseconds(std::max(opts.timeout_ms, 60000)), &rv);
    if (!st.ok()) {
      std::fprintf(stderr, "optcast bench: %s\n", st.message().c_str());
      return 1;
    }
    return RunBenchRank(opts, *rv, opts.servers);
  }

  // Local: start the servers and the rank processes on this machine.
  LocalCluster cluster;
  std::vector<std::string> servers = opts.servers;
  if (wants_server && servers.empty()) {
    transport::Kind kind = transport::Kind::kTcp;
    Status st = opts.transport.empty() ? transport::KindFromEnvironment(transport::Kind::kTcp, &kind)
                                       : transport::ParseKind(opts.transport, "--transport", &kind);
    if (st.ok())
      st = cluster.StartServers(opts.nservers, opts.host, &servers, kind, opts.io_threads, opts.reduce_threads);
    if (!st.ok()) {
      std::fprintf(stderr, "optcast bench: %s\n", st.message().c_str());
      return 1;
    }
    opts.server_pids.assign(cluster.server_pids().begin(), cluster.server_pids().end());
  }
  transport::posix::Socket listener;
  uint16_t port = 0;
  if (Status st = transport::posix::Listen({opts.host, 0}, &listener);
      !st.ok() || !transport::posix::LocalPort(listener, &port).ok()) {
    std::fprintf(stderr, "optcast bench: cannot open the rendezvous port: %s\n", st.message().c_str());
    return 1;
  }
  const auto rv_timeout = std::chrono::milliseconds(std::max(opts.timeout_ms, 60000));
  auto body = [&](int rank) -> int {
    std::unique_ptr<bootstrap::Rendezvous> rv;
    Status st = rank == 0 ? bootstrap::Rendezvous::CreateRoot(std::move(listener), opts.nranks, rv_timeout, &rv)
                          : bootstrap::Rendezvous::Create({opts.host, port}, rank, opts.nranks, rv_timeout, &rv);
    if (!st.ok()) {
      std::fprintf(stderr, "optcast bench: rank %d: %s\n", rank, st.message().c_str());
      return 1;
    }
    return RunBenchRank(opts, *rv, servers);
  };
  Status st = cluster.RunRanks(opts.nranks, body, std::chrono::seconds(3600));
  if (!st.ok()) {
    std::fprintf(stderr, "optcast bench: %s\n", st.message().c_str());
    return 1;
  }
  const auto rss = cluster.ServerPeakRss();
  if (!rss.empty() && !opts.quiet) {
    std::printf("# server peak RSS (MiB):");
    for (uint64_t b : rss) std::printf(" %.1f", b / 1048576.0);
    std::printf("\n");
  }
  return 0;
}

std::function<int()> AddBenchCommand(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  auto sizes = std::make_shared<std::array<std::string, 2>>(std::array<std::string, 2>{"8", "64M"});
  auto dtype = std::make_shared<std::string>("float32");
  auto op = std::make_shared<std::string>("sum");
  auto check = std::make_shared<int>(1);
  auto chunk = std::make_shared<std::string>();
  auto plugin_chunk = std::make_shared<std::string>("512K");
  CLI::App* cmd = app.add_subcommand("bench",
                                     "AllReduce benchmark in the nccl-tests layout: reduction servers "
                                     "against a ring, on this machine or as one rank of a multi-host run");
  cmd->add_option("-b,--minbytes", (*sizes)[0], "Smallest size (e.g. 8, 1K, 1M)")->capture_default_str();
  cmd->add_option("-e,--maxbytes", (*sizes)[1], "Largest size")->capture_default_str();
  cmd->add_option("-f,--stepfactor", opts->factor, "Multiply the size by this each step")->capture_default_str();
  cmd->add_option("-d,--datatype", *dtype, "float32 float16 bfloat16 float64 int8 uint8 int32 uint32 int64 uint64")
      ->capture_default_str();
  cmd->add_option("-o,--op", *op, "sum prod min max avg, or band bor bxor (integer types)")->capture_default_str();
  cmd->add_option("-n,--iters", opts->iters, "Timed iterations per size")->capture_default_str();
  cmd->add_option("-w,--warmup_iters", opts->warmup, "Untimed iterations per size")->capture_default_str();
  cmd->add_option("-c,--check", *check, "Check results (1) or not (0)")->capture_default_str();
  cmd->add_option("--algo", opts->algos,
                  "Algorithms to run: server, ring, plugin (= server through the NCCL plugin), server-bf16 (= server "
                  "with float32 on a bfloat16 wire) (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--nranks", opts->nranks, "Rank processes (local mode), or the run's size (with --rank)")
      ->capture_default_str();
  cmd->add_option("--nservers", opts->nservers, "Reduction servers to start (local mode)")->capture_default_str();
  cmd->add_option("--io-threads", opts->io_threads,
                  "Lanes (event loops) of each server started (local mode; 0: the server's default, as "
                  "`optcast server --io-threads`)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  cmd->add_option("--reduce-threads", opts->reduce_threads,
                  "Reduction threads of each server started (local mode; -1: the server's default, as "
                  "`optcast server --reduce-threads`)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 256));
  cmd->add_option("--servers", opts->servers, "Use these running servers, HOST:PORT,... (or OPTCAST_SERVERS)")
      ->delimiter(',');
  cmd->add_option("--rank", opts->rank, "Be this rank of a multi-host run (or OPTCAST_RANK / mpirun / Slurm)");
  cmd->add_option("--rendezvous", opts->rendezvous, "HOST:PORT where rank 0 listens for the others");
  cmd->add_option("--host", opts->host, "Address for local servers and ranks")->capture_default_str();
  cmd->add_option("--transport", opts->transport,
                  "What carries the server path: tcp (built in) or ofi (libfabric; provider from "
                  "OPTCAST_OFI_PROVIDER). Default: OPTCAST_TRANSPORT, else tcp")
      ->check(CLI::IsMember({"tcp", "ofi"}));
  cmd->add_option("--chunk", *chunk, "Chunk size for the server path (default: automatic)");
  cmd->add_option("--through", opts->through,
                  "What carries --algo server: client (the C++ client library) or nccl-plugin "
                  "(libnccl-net-optcast.so's CollNet, driven as NCCL's proxy does; rows say 'plugin')")
      ->capture_default_str()
      ->check(CLI::IsMember({"client", "nccl-plugin"}));
  cmd->add_option("--plugin", opts->plugin_path,
                  "The libnccl-net-optcast.so to load (default: $OPTCAST_NCCL_PLUGIN, else the one built or "
                  "installed with this optcast)");
  cmd->add_option("--wire", opts->wire,
                  "float32 on a 16-bit wire for the server path and the plugin: bf16, fp16 or off (default: "
                  "OPTCAST_WIRE_DTYPE); results are checked within the bound the format allows");
  cmd->add_option("--plugin-chunk", *plugin_chunk, "NCCL's chunk size: the bytes of each CollNet request")
      ->capture_default_str();
  cmd->add_option("--channels", opts->channels, "NCCL channels sharing the plugin's one collComm")
      ->capture_default_str();
  cmd->add_option("--proxy-idle-us", opts->proxy_idle_us,
                  "When a pass of the plugin's driver finds nothing to do: 0 yields, as NCCL's proxy thread does; "
                  "N sleeps N microseconds (for hosts that share cores, as on the emulated cluster)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--timeout-ms", opts->timeout_ms, "Give up on a stuck collective after this long")
      ->capture_default_str();
  cmd->add_flag(
      "--no-failover", [opts](int64_t) { opts->failover = false; },
      "Fail on a dead server instead of going on over the servers left (as OPTCAST_FAILOVER=0)");
  cmd->add_option("--json", opts->json_path, "Also write the results as JSON to this file");
  cmd->add_option("--iteration-times", opts->iteration_times_path,
                  "Rank 0 writes each timed iteration here: algo, bytes, iteration, wall-clock end (s since the "
                  "epoch), microseconds, failovers so far");
  cmd->add_option("--plot", opts->plot_path, "Also draw algbw and busbw against size as a PNG (needs gnuplot)");
  cmd->add_option("--progress", opts->progress, "Show progress on stderr: on, off, auto (when it is a terminal)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off", "auto"}));
  return [=] {
    BenchOptions o = *opts;
    auto lo = ParseByteSize((*sizes)[0]);
    auto hi = ParseByteSize((*sizes)[1]);
    auto dt = ParseDataType(*dtype);
    auto rop = ParseRedOp(*op);
    if (!lo || !hi) {
      std::fprintf(stderr, "optcast bench: sizes must look like 8, 64K, 1M or 2G\n");
      return 2;
    }
    if (!dt || !rop) {
      std::fprintf(stderr, "optcast bench: unknown %s '%s'\n", dt ? "op" : "datatype",
                   dt ? op->c_str() : dtype->c_str());
      return 2;
    }
    if (!chunk->empty()) {
      auto c = ParseByteSize(*chunk);
      if (!c || *c == 0) {
        std::fprintf(stderr, "optcast bench: --chunk '%s' is not a size\n", chunk->c_str());
        return 2;
      }
      o.chunk_bytes = *c;
    }
    if (!IsRedOpDefinedFor(*rop, *dt)) {
      std::fprintf(stderr, "optcast bench: %s\n", UndefinedRedOpMessage(*rop, *dt).c_str());
      return 2;
    }
    if (!o.wire.empty()) {
      DataType wire = DataType::kFloat32;
      if (Status st = ParseWireDtype(o.wire, "--wire", &wire); !st.ok()) {
        std::fprintf(stderr, "optcast bench: %s\n", st.message().c_str());
        return 2;
      }
    }
    auto pc = ParseByteSize(*plugin_chunk);
    if (!pc || *pc == 0) {
      std::fprintf(stderr, "optcast bench: --plugin-chunk '%s' is not a size\n", plugin_chunk->c_str());
      return 2;
    }
    o.plugin_chunk_bytes = *pc;
    o.min_bytes = *lo;
    o.max_bytes = *hi;
    o.dtype = *dt;
    o.op = *rop;
    o.check = *check != 0;
    return RunBench(o);
  };
}

}  // namespace optcast::tools
