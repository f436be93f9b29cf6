// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Logging through NCCL's own logger (the function NCCL passes to init), so that our lines appear
// with NCCL_DEBUG=INFO / WARN like NCCL's, prefixed "NET/Optcast : ".

#include <fmt/format.h>

#include <string>

#include "nccl/nccl_abi.h"

namespace optcast::nccl {

// Remembers the logger NCCL handed to init (any version); null is ignored.
void SetLogger(ncclDebugLogger_t logger);
// Writes one line. Before NCCL gave us a logger, warnings go to stderr and the rest is dropped.
void LogLine(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const std::string& text);

}  // namespace optcast::nccl

#define OPTCAST_NCCL_WARN(...)                                                                            \
  ::optcast::nccl::LogLine(::optcast::nccl::NCCL_LOG_WARN, ::optcast::nccl::NCCL_NET, __FILE__, __LINE__, \
                           fmt::format(__VA_ARGS__))
#define OPTCAST_NCCL_INFO(flags, ...) \
  ::optcast::nccl::LogLine(::optcast::nccl::NCCL_LOG_INFO, (flags), __FILE__, __LINE__, fmt::format(__VA_ARGS__))
