// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace optcast::tools {

// `optcast emu up|run|down|status`: an emulated cluster of rate-limited hosts on this machine.
std::function<int()> AddEmuCommand(CLI::App& app);

}  // namespace optcast::tools
