// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Lets a YAML file set a subcommand's flags: each key is a long flag name (`timeout-ms: 5000`,
// `timeout_ms` also works), each value goes through the same parsing and checks as on the command
// line, and a flag given on the command line wins over the file.

#include <CLI/CLI.hpp>
#include <string>

#include "optcast/status.h"

namespace optcast::daemon {

// Applies `path` to the flags of `cmd` after the command line was parsed. An unknown key or a bad
// value is refused with "FILE:LINE: ..." naming the key, the reason and the keys there are.
Status ApplyConfigFile(CLI::App* cmd, const std::string& path);

// The keys a configuration file for `cmd` may set (its long flag names, without "--").
std::vector<std::string> ConfigKeys(const CLI::App* cmd);

}  // namespace optcast::daemon
