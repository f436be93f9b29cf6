// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include "tools/bench_options.h"

namespace optcast::tools {

// Runs the benchmark: locally (starting servers and ranks) or as one rank of a multi-host run.
int RunBench(BenchOptions opts);

}  // namespace optcast::tools
