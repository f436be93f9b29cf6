// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <spdlog/spdlog.h>

namespace optcast {

// The process-wide logger (stderr). Level from OPTCAST_LOG_LEVEL: trace, debug, info, warn
// (default), error, off.
spdlog::logger& Log();

}  // namespace optcast
