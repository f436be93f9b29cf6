// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <vector>

#include "bootstrap/rendezvous.h"
#include "tools/bench_options.h"

namespace optcast::tools {

// One rank's part of the benchmark: every algorithm over every size. Rank 0 prints the table
// (unless quiet) and writes the JSON file when asked. Returns a process exit code.
int RunBenchRank(const BenchOptions& opts, bootstrap::Rendezvous& rv, const std::vector<std::string>& servers);

}  // namespace optcast::tools
