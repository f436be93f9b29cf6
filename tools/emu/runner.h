// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Runs external commands (ip, tc, gnuplot) and reports failures with the command line and its
// stderr, so that a failed `ip link add` says exactly what the kernel refused.

#include <string>
#include <vector>

#include "optcast/status.h"

namespace optcast::tools::emu {

struct CommandResult {
  int exit_code = -1;  // -1: could not start, or killed by a signal
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up in PATH) to completion, capturing stdout and stderr.
CommandResult RunCommand(const std::vector<std::string>& argv);

// Runs argv and turns a non-zero exit into an error naming the command and quoting its stderr.
Status RunChecked(const std::vector<std::string>& argv);
// Same, and hands back stdout.
Status RunChecked(const std::vector<std::string>& argv, std::string* out);

// "ip -n x link add ..." for messages.
std::string JoinCommand(const std::vector<std::string>& argv);

// Whether `name` is an executable in PATH.
bool InPath(const std::string& name);

}  // namespace optcast::tools::emu
