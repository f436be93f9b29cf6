// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// `optcast server`: the reduction server as a long-running daemon. Its flags (and the YAML file
// that may set them), the server's options built from them, signals (the first drains, the second
// stops), the metrics endpoint and the trace file around the server's event loop.

#include <CLI/CLI.hpp>
#include <functional>

namespace optcast::daemon {

// Registers `server` and its flags on `app`; returns the function that runs it. Its exit code is
// 0 when the server stopped cleanly, 1 when it failed, 2 when the options or the configuration
// file were refused.
std::function<int()> AddServerCommand(CLI::App& app);

}  // namespace optcast::daemon
