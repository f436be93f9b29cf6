// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What a plugin logged through the logger its host (NCCL, or a program playing NCCL) gave it,
// kept in this process: a driver quotes the last warning in its errors, a test checks the lines.

#include <cstdarg>
#include <string>
#include <vector>

#include "nccl/nccl_abi.h"

namespace optcast::tools::nccl_driver {

// "WARN <text>" for warnings, "INFO <text>" for every other level, formatted as printf would.
std::string FormatPluginLine(nccl::ncclDebugLogLevel level, const char* fmt, va_list ap);

// Keeps a line from FormatPluginLine (thread-safe: plugins log from any thread).
void KeepPluginLine(const std::string& line);
// Every line kept so far, oldest first.
std::vector<std::string> PluginLines();
// The text of the most recent warning kept (without "WARN "), or "".
std::string LastPluginWarning();

}  // namespace optcast::tools::nccl_driver
