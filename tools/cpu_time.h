// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <sys/types.h>

#include <vector>

namespace optcast::tools {

// CPU time (user + system, every thread) this process has used, in seconds.
double SelfCpuSeconds();

// CPU time of every thread of these processes together, in seconds (from /proc, nanosecond
// resolution). A process that has gone counts as zero.
double ProcessesCpuSeconds(const std::vector<pid_t>& pids);

}  // namespace optcast::tools
