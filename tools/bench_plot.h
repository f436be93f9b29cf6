// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <string>
#include <vector>

#include "optcast/status.h"
#include "tools/bench_options.h"

namespace optcast::tools {

// Draws the benchmark's results as a PNG: algbw and busbw against message size, side by side,
// one line per algorithm.
// "AllReduce float32 sum, 4 ranks, 1 reduction server" (no servers named for a ring-only run).
std::string BenchPlotTitle(const BenchOptions& opts, int nranks, size_t nservers);

Status WriteBenchPlot(const std::string& path, const BenchOptions& opts, int nranks, size_t nservers,
                      const std::vector<BenchRow>& rows);

}  // namespace optcast::tools
