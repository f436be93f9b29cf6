// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "daemon/server_command.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "auth/secret.h"
#include "common/bit_rate.h"
#include "common/env.h"
#include "common/log.h"
#include "config/root_placement.h"
#include "config/topology.h"
#include "daemon/config_flags.h"
#include "observe/metrics_http.h"
#include "observe/trace.h"
#include "server/server.h"
#include "transport/fabric_info.h"
#include "transport/posix/congestion.h"
#include "transport/posix/interface_rate.h"
#include "transport/posix/traffic_class.h"

namespace optcast::daemon {

namespace {

struct Flags {
  std::string listen;  // default depends on whether a secret is configured
  int timeout_ms = 30000;
  std::string max_chunk = "64M";
  std::string memory_limit = "0";
  std::string job_memory_limit = "0";
  uint32_t max_connections = 0;
  uint32_t max_open_chunks = 1024;
  uint32_t max_fan_in = 8192;
  std::string secret_file;
  bool insecure = false;
  int shutdown_timeout_ms = 30000;
  std::string log_level = "info";
  int io_threads = 0;
  int reduce_threads = -1;
  double reduce_offload_share = 0.2;
  std::string link_rate = "auto";
  std::string metrics_listen;
  std::string trace;
  std::string config;
  std::string upstream;
  std::string topology;
  std::string name;
  std::string transport;       // empty: OPTCAST_TRANSPORT, else tcp
  std::string ofi_provider;    // empty: OPTCAST_OFI_PROVIDER, FI_PROVIDER, else automatic
  std::string tcp_congestion;  // empty: OPTCAST_TCP_CONGESTION, else CUBIC where the host offers it
  std::string latency_bytes = "64K";
  std::string latency_dscp = "46";
};

// Checks shared by the command line and the configuration file, so both name the same problem.
const CLI::Validator kEndpoint(
    [](std::string& v) {
      transport::Endpoint ep;
      Status st = transport::ParseEndpoint(v, &ep, 8918, /*allow_any_port=*/true);
      return st.ok() ? std::string() : st.message();
    },
    "HOST:PORT");
const CLI::Validator kByteSize(
    [](std::string& v) { return ParseByteSize(v) ? std::string() : "'" + v + "' is not a size like 64M or 8G"; },
    "SIZE");
const CLI::Validator kMilliseconds(
    [](std::string& v) {
      char* end = nullptr;
      const long long ms = std::strtoll(v.c_str(), &end, 10);
      const bool ok = !v.empty() && *end == '\0' && ms > 0 && ms <= INT32_MAX;
      return ok ? std::string() : "'" + v + "' is not a positive number of milliseconds";
    },
    "MS");
const CLI::Validator kDscp(
    [](std::string& v) {
      int dscp = 0;
      return transport::posix::ParseDscp(v, "--latency-dscp", &dscp).ok()
                 ? std::string()
                 : "'" + v + "' is not a DSCP; write 0-63 (46: Expedited Forwarding) or off";
    },
    "DSCP");
std::string BadLinkRate(const std::string& v) {
  return "'" + v + "' is not a rate like 100mbit or 25gbit, 'auto' or 'unknown'";
}
const CLI::Validator kLinkRate(
    [](std::string& v) { return v == "auto" || v == "unknown" || ParseBitRate(v) ? std::string() : BadLinkRate(v); },
    "RATE");
const CLI::Validator kLogLevel(
    [](std::string& v) {
      for (const char* l : {"trace", "debug", "info", "warn", "error", "off"}) {
        if (v == l) return std::string();
      }
      return "'" + v + "' is not a log level; use trace, debug, info, warn, error or off";
    },
    "LEVEL");

// A libfabric provider name ("tcp", "tcp;ofi_rxm", "efa"): each part must be a provider that
// libfabric offers on this machine, so that a typo is named here rather than at the first client.
const CLI::Validator kOfiProvider(
    [](std::string& v) {
      std::vector<std::string> parts;
      for (const std::string& name : transport::AvailableFabricProviders()) {
        size_t start = 0;
        for (size_t semi; (semi = name.find(';', start)) != std::string::npos; start = semi + 1) {
          parts.push_back(name.substr(start, semi - start));
        }
        parts.push_back(name.substr(start));
      }
      size_t start = 0;
      for (;;) {
        const size_t semi = v.find(';', start);
        const std::string part = v.substr(start, semi == std::string::npos ? std::string::npos : semi - start);
        if (std::find(parts.begin(), parts.end(), part) == parts.end()) {
          std::sort(parts.begin(), parts.end());
          parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
          return fmt::format("'{}' is not a libfabric provider on this machine; available: {} (e.g. 'tcp;ofi_rxm')",
                             part, parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", ")));
        }
        if (semi == std::string::npos) return std::string();
        start = semi + 1;
      }
    },
    "PROVIDER");

// A TCP congestion control this process may set, or "system".
const CLI::Validator kTcpCongestion(
    [](std::string& v) {
      Status st = transport::posix::CheckCongestionControl(v);
      return st.ok() ? std::string() : st.message();
    },
    "NAME");

int Fail(int code, const Status& st) {
  std::fprintf(stderr, "optcast server: %s\n", st.message().c_str());
  return code;
}

Status ParseSize(const std::string& flag, const std::string& text, uint64_t* out) {
  auto v = ParseByteSize(text);
  if (!v) return InvalidArgument(flag + " '" + text + "' is not a size like 64M or 8G");
  *out = *v;
  return Status::Ok();
}

// The aggregation tree: the parent from --upstream, or from this server's entry (--name) in the
// --topology file, whose address is also where it listens unless --listen says otherwise.
Status TreeOptions(const Flags& f, server::ServerOptions* opts) {
  if (!f.upstream.empty() && !f.topology.empty()) {
    return InvalidArgument("--upstream and --topology both name the parent; give one");
  }
  if (!f.upstream.empty()) {
    transport::Endpoint ep;
    OPTCAST_RETURN_IF_ERROR(transport::ParseEndpoint(f.upstream, &ep, 8918));
    opts->upstream = ep;
    return Status::Ok();
  }
  if (f.topology.empty()) {
    if (!f.name.empty()) return InvalidArgument("--name picks this server's entry of a --topology file; give the file");
    return Status::Ok();
  }
  config::Topology topo;
  OPTCAST_RETURN_IF_ERROR(config::ReadTopology(f.topology, &topo));
  std::vector<std::string> names;
  for (const auto& s : topo.servers) names.push_back(s.name);
  const config::TopologyServer* me = topo.Find(f.name);
  if (me == nullptr) {
    return InvalidArgument(fmt::format("{}: no server named '{}'; pass --name with one of: {}", f.topology,
                                       f.name.empty() ? "(none given)" : f.name, fmt::join(names, ", ")));
  }
  if (f.listen.empty()) opts->listen = transport::Endpoint{opts->listen.host, me->address.port};
  if (!me->parent.empty()) opts->upstream = topo.Find(me->parent)->address;
  opts->tree_root = me->parent.empty() && !topo.Children(me->name).empty();
  Log().info("topology {}: server '{}' at depth {}, parent {}, {} child server(s)", f.topology, me->name,
             topo.Depth(me->name), me->parent.empty() ? "(none: the root)" : me->parent,
             topo.Children(me->name).size());
  // Roots sharing a rack work, but their rack's uplink carries every rack's partials for each.
  if (opts->tree_root) {
    for (const std::string& w : config::RootPlacementWarnings(topo)) Log().warn("{}", w);
  }
  return Status::Ok();
}

// --link-rate: a rate as given, "unknown", or "auto": the listening interface's speed.
Status ResolveLinkRate(const std::string& text, server::ServerOptions* opts) {
  if (text == "unknown") {
    opts->link_rate_bits = 0;
    return Status::Ok();
  }
  if (text != "auto") {
    auto bits = ParseBitRate(text);
    if (!bits) {
      return InvalidArgument("--link-rate " + BadLinkRate(text));
    }
    opts->link_rate_bits = *bits;
    return Status::Ok();
  }
  const transport::posix::InterfaceRate found = transport::posix::RateOfInterfaceFor(opts->listen.host);
  opts->link_rate_bits = found.bits;
  if (found.bits != 0) {
    Log().info("port rate {} ({}'s speed); pass --link-rate if the port is shaped below it", FormatBitRate(found.bits),
               found.interface);
  } else {
    Log().debug("no interface for {} reports a speed; port rate unknown (--link-rate sets it)", opts->listen.host);
  }
  return Status::Ok();
}

Status BuildOptions(const Flags& f, server::ServerOptions* opts) {
  if (!f.secret_file.empty()) {
    OPTCAST_RETURN_IF_ERROR(auth::LoadSecretFile(f.secret_file, &opts->secret));
  } else {
    OPTCAST_RETURN_IF_ERROR(auth::SecretFromEnvironment(&opts->secret));
  }
  opts->insecure = f.insecure;
  // With a secret (or an explicit --insecure) serve the network; without, this machine only.
  const std::string listen =
      !f.listen.empty() ? f.listen : (opts->secret.empty() && !f.insecure ? "127.0.0.1:8918" : "0.0.0.0:8918");
  OPTCAST_RETURN_IF_ERROR(transport::ParseEndpoint(listen, &opts->listen, 8918, /*allow_any_port=*/true));
  OPTCAST_RETURN_IF_ERROR(ParseSize("--max-chunk", f.max_chunk, &opts->max_payload));
  OPTCAST_RETURN_IF_ERROR(ParseSize("--memory-limit", f.memory_limit, &opts->memory_limit));
  OPTCAST_RETURN_IF_ERROR(ParseSize("--job-memory-limit", f.job_memory_limit, &opts->job_memory_limit));
  opts->job_timeout = std::chrono::milliseconds(f.timeout_ms);
  opts->io_threads = f.io_threads;
  opts->reduce_threads = f.reduce_threads;
  opts->reduce_offload_share = f.reduce_offload_share;
  OPTCAST_RETURN_IF_ERROR(ResolveLinkRate(f.link_rate, opts));
  opts->max_connections = f.max_connections;
  opts->max_open_chunks_per_rank = f.max_open_chunks;
  opts->max_fan_in = f.max_fan_in;
  transport::TransportOptions& t = opts->transport;
  if (f.transport.empty()) {
    OPTCAST_RETURN_IF_ERROR(transport::KindFromEnvironment(transport::Kind::kTcp, &t.kind));
  } else {
    OPTCAST_RETURN_IF_ERROR(transport::ParseKind(f.transport, "--transport", &t.kind));
  }
  if (!f.ofi_provider.empty() && t.kind != transport::Kind::kOfi) {
    return InvalidArgument("--ofi-provider (ofi-provider: in a config file) '" + f.ofi_provider +
                           "' applies to the ofi transport only; add --transport ofi (transport: ofi), or remove it");
  }
  t.ofi.provider = f.ofi_provider;
  opts->latency_bytes = *ParseByteSize(f.latency_bytes);  // checked by kByteSize
  OPTCAST_RETURN_IF_ERROR(transport::posix::ParseDscp(f.latency_dscp, "--latency-dscp", &t.tcp.latency_dscp));
  t.tcp.congestion = f.tcp_congestion;
  if (f.tcp_congestion.empty()) {
    OPTCAST_RETURN_IF_ERROR(transport::posix::CongestionControlFromEnvironment(&t.tcp.congestion));
  }
  return TreeOptions(f, opts);
}

}  // namespace

std::function<int()> AddServerCommand(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("server", "Run a reduction server (a long-running daemon serving many jobs)");
  cmd->add_option("-l,--listen", flags->listen,
                  "Address to listen on, HOST:PORT (default 0.0.0.0:8918 with a secret, else 127.0.0.1:8918; port 0 "
                  "picks a free one)")
      ->check(kEndpoint);
  cmd->add_option("--secret-file", flags->secret_file,
                  "File holding the deployment secret that every hello must prove (else OPTCAST_SECRET_FILE, "
                  "OPTCAST_SECRET)");
  cmd->add_flag("--insecure", flags->insecure,
                "Serve beyond loopback without a secret (anyone who reaches the port can join jobs)");
  cmd->add_option("--timeout-ms", flags->timeout_ms,
                  "Fail a job whose collective makes no progress for this long (milliseconds)")
      ->capture_default_str()
      ->check(kMilliseconds);
  cmd->add_option("--transport", flags->transport,
                  "What carries the protocol: tcp (built in) or ofi (libfabric; provider from OPTCAST_OFI_PROVIDER "
                  "or FI_PROVIDER, else efa, verbs or tcp). Default: OPTCAST_TRANSPORT, else tcp")
      ->check(CLI::IsMember({"tcp", "ofi"}));
  cmd->add_option("--ofi-provider", flags->ofi_provider,
                  "The libfabric provider for --transport ofi, e.g. 'tcp;ofi_rxm', 'verbs;ofi_rxm', 'efa' (default: "
                  "OPTCAST_OFI_PROVIDER, else FI_PROVIDER, else efa, verbs or tcp); clients must use the same")
      ->check(kOfiProvider);
  cmd->add_option("--tcp-congestion", flags->tcp_congestion,
                  "TCP congestion control of the tcp transport's connections: a name the host allows (e.g. cubic, "
                  "bbr, reno) or 'system' for the host's default (default: OPTCAST_TCP_CONGESTION, else cubic where "
                  "the host offers it; docs/deploying.md)")
      ->check(kTcpCongestion);
  cmd->add_option("--latency-bytes", flags->latency_bytes,
                  "Results of collectives of at most this many bytes per rank go out in the latency traffic class "
                  "(--latency-dscp), as ranks send their chunks (OPTCAST_LATENCY_BYTES); 0: none")
      ->capture_default_str()
      ->check(kByteSize);
  cmd->add_option("--latency-dscp", flags->latency_dscp,
                  "DSCP of the latency traffic class, 0-63, or off (46: Expedited Forwarding; docs/deploying.md)")
      ->capture_default_str()
      ->check(kDscp);
  cmd->add_option("--max-chunk", flags->max_chunk, "Largest chunk accepted in one message (e.g. 64M)")
      ->capture_default_str()
      ->check(kByteSize);
  cmd->add_option("--memory-limit", flags->memory_limit,
                  "Bytes of chunk data and state the server holds at most (e.g. 8G; 0: half the RAM)")
      ->capture_default_str()
      ->check(kByteSize);
  cmd->add_option("--job-memory-limit", flags->job_memory_limit, "The same for one job (0: the server's limit)")
      ->capture_default_str()
      ->check(kByteSize);
  cmd->add_option("--max-connections", flags->max_connections,
                  "Connections served at once (0: from the open-file limit)")
      ->capture_default_str();
  cmd->add_option("--max-open-chunks", flags->max_open_chunks, "Chunks one rank may have sent without an answer yet")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-fan-in", flags->max_fan_in,
                  "Members of one job this server combines: a flat job's ranks, or a tree job's ranks and child "
                  "servers here")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--shutdown-timeout-ms", flags->shutdown_timeout_ms,
                  "On SIGTERM/SIGINT, how long collectives in flight may take to finish before the server exits")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--io-threads", flags->io_threads,
                  "Lanes: event loops, each with its own connections, buffers and reduce threads; ranks join every "
                  "lane, so a server of N lanes serves like N servers behind one port (0: half the usable cores, "
                  "1 to 8; a server in a tree, or over ofi, runs one)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  cmd->add_option("--reduce-threads", flags->reduce_threads,
                  "Threads reducing chunks beside the event loops, shared out over the lanes (-1: usable cores minus "
                  "one per lane; 0: none)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1024));
  cmd->add_option("--reduce-offload-share", flags->reduce_offload_share,
                  "Share of a core the reductions must have needed lately before chunks go to the reduction "
                  "threads; below it the event loop reduces, which costs less than waking a thread (0: always the "
                  "threads)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--link-rate", flags->link_rate,
                  "This server's port rate each way (e.g. 100mbit, 25gbit), told to every rank: on slow ports ranks "
                  "spread small collectives over more servers. 'auto': the listening interface's speed; 'unknown': "
                  "none")
      ->capture_default_str()
      ->check(kLinkRate);
  cmd->add_option("--log-level", flags->log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->check(kLogLevel);
  cmd->add_option("--metrics-listen", flags->metrics_listen,
                  "Serve Prometheus metrics at http://HOST:PORT/metrics (off when not given)")
      ->check(kEndpoint);
  cmd->add_option("--trace", flags->trace,
                  "Write a timeline trace (Chrome trace-event JSON, for Perfetto) to this file until the server stops");
  cmd->add_option("--upstream", flags->upstream,
                  "Aggregation tree: the parent server, HOST:PORT; each job's ranks here are combined and sent "
                  "there as one member (docs/tree.md)")
      ->check(kEndpoint);
  cmd->add_option("--topology", flags->topology,
                  "Aggregation tree: a YAML file listing the servers (name, address, rack, pod, parent); this "
                  "server's parent comes from its entry (--name)");
  cmd->add_option("--name", flags->name, "This server's name in the --topology file");
  cmd->add_option("--config", flags->config,
                  "Read flags from this YAML file (keys are the flag names: `timeout-ms: 5000`); the command line "
                  "wins");
  return [flags, cmd] {
    if (!flags->config.empty()) {
      if (Status st = ApplyConfigFile(cmd, flags->config); !st.ok()) return Fail(2, st);
    }
    Log().set_level(spdlog::level::from_str(flags->log_level));
    server::ServerOptions opts;
    if (Status st = BuildOptions(*flags, &opts); !st.ok()) return Fail(2, st);

    // Signals go to one thread that waits for them; every other thread blocks them.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGPIPE, SIG_IGN);

    server::Server srv(opts);
    if (Status st = srv.Start(); !st.ok()) return Fail(1, st);
    observe::MetricsHttpServer metrics(srv.metrics());
    if (!flags->metrics_listen.empty()) {
      transport::Endpoint ep;
      Status st = transport::ParseEndpoint(flags->metrics_listen, &ep, 9464, /*allow_any_port=*/true);
      if (st.ok()) st = metrics.Start(ep);
      if (!st.ok()) return Fail(1, st);
    }
    if (!flags->trace.empty()) {
      if (Status st = observe::StartTrace(flags->trace, "optcast server :" + std::to_string(srv.port())); !st.ok()) {
        return Fail(1, st);
      }
    }
    std::printf("optcast server listening on %s:%u%s\n", opts.listen.host.c_str(), srv.port(),
                opts.secret.empty() ? " (no secret: hellos are not authenticated)" : " (hellos authenticated)");
    if (!flags->metrics_listen.empty()) {
      std::printf("optcast server metrics on http://%s:%u/metrics\n",
                  flags->metrics_listen.substr(0, flags->metrics_listen.rfind(':')).c_str(), metrics.port());
    }
    std::fflush(stdout);

    // First signal: graceful shutdown. Second: stop at once. The main thread wakes this one with
    // a SIGTERM of its own once the server has stopped; `exiting` tells that wake-up apart from
    // an operator's signal, so that only a real second signal is reported as one.
    std::atomic<bool> exiting{false};
    std::thread signals([&srv, &exiting, sigs, grace = flags->shutdown_timeout_ms] {
      int sig = 0;
      if (sigwait(&sigs, &sig) != 0 || exiting.load()) return;
      Log().info("{}: shutting down gracefully (up to {} ms)", sig == SIGTERM ? "SIGTERM" : "SIGINT", grace);
      srv.Drain(std::chrono::milliseconds(grace));
      if (sigwait(&sigs, &sig) != 0 || exiting.load()) return;
      Log().warn("second signal ({}): stopping now", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      srv.Stop();
    });
    Status st = srv.Run();
    exiting.store(true);
    pthread_kill(signals.native_handle(), SIGTERM);
    signals.join();
    observe::StopTrace();
    metrics.Stop();
    if (!st.ok()) return Fail(1, st);
    std::printf("optcast server: stopped\n");
    return 0;
  };
}

}  // namespace optcast::daemon
