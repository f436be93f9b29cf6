// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace optcast::tools {

// The tools around the product; `server`, the daemon, is in daemon/server_command.h. Each
// subcommand registers its flags on `app` and returns the function that runs it (an exit code).
std::function<int()> AddBenchCommand(CLI::App& app);
std::function<int()> AddDemoCommand(CLI::App& app);

}  // namespace optcast::tools
