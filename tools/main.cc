// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// `optcast`: one binary with subcommands, like git.

#include <CLI/CLI.hpp>

#include "daemon/server_command.h"
#include "tools/commands.h"
#include "tools/emu/emu_command.h"
#include "tools/topology/topology_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Optcast: AllReduce offload to CPU reduction servers"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "optcast 0.1.0");
  auto server = optcast::daemon::AddServerCommand(app);
  auto bench = optcast::tools::AddBenchCommand(app);
  auto demo = optcast::tools::AddDemoCommand(app);
  auto emu = optcast::tools::AddEmuCommand(app);
  auto topology = optcast::tools::topology::AddTopologyCommand(app);
  CLI11_PARSE(app, argc, argv);
  const std::string name = app.get_subcommands().front()->get_name();
  if (name == "server") return server();
  if (name == "bench") return bench();
  if (name == "demo") return demo();
  if (name == "emu") return emu();
  if (name == "topology") return topology();
  return 1;
}
