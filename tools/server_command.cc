// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include <signal.h>

#include <cstdio>
#include <thread>

#include "common/env.h"
#include "common/log.h"
#include "server/server.h"
#include "tools/commands.h"

namespace optcast::tools {

namespace {
server::Server* g_server = nullptr;
void OnSignal(int) {
  if (g_server != nullptr) g_server->Stop();
}
}  // namespace

std::function<int()> AddServerCommand(CLI::App& app) {
  struct Flags {
    std::string listen = "0.0.0.0:8918";
    int timeout_ms = 30000;
    std::string max_chunk = "64M";
    std::string log_level = "info";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("server", "Run a reduction server (a long-running daemon serving many jobs)");
  cmd->add_option("-l,--listen", flags->listen, "Address to listen on, HOST:PORT")->capture_default_str();
  cmd->add_option("--timeout-ms", flags->timeout_ms,
                  "Fail a job whose collective makes no progress for this long (milliseconds)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-chunk", flags->max_chunk, "Largest chunk accepted in one message (e.g. 64M)")
      ->capture_default_str();
  cmd->add_option("--log-level", flags->log_level, "trace, debug, info, warn, error")->capture_default_str();
  return [flags] {
    Log().set_level(spdlog::level::from_str(flags->log_level));
    server::ServerOptions opts;
    Status st = transport::ParseEndpoint(flags->listen, &opts.listen, 8918);
    auto max_chunk = ParseByteSize(flags->max_chunk);
    if (st.ok() && !max_chunk) st = InvalidArgument("--max-chunk '" + flags->max_chunk + "' is not a size like 64M");
    if (!st.ok()) {
      std::fprintf(stderr, "optcast server: %s\n", st.message().c_str());
      return 2;
    }
    opts.max_payload = *max_chunk;
    opts.job_timeout = std::chrono::milliseconds(flags->timeout_ms);
    server::Server srv(opts);
    st = srv.Start();
    if (!st.ok()) {
      std::fprintf(stderr, "optcast server: %s\n", st.message().c_str());
      return 1;
    }
    std::printf("optcast server listening on %s:%u\n", opts.listen.host.c_str(), srv.port());
    std::fflush(stdout);
    g_server = &srv;
    signal(SIGTERM, OnSignal);
    signal(SIGINT, OnSignal);
    signal(SIGPIPE, SIG_IGN);
    st = srv.Run();
    g_server = nullptr;
    if (!st.ok()) {
      std::fprintf(stderr, "optcast server: %s\n", st.message().c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace optcast::tools
