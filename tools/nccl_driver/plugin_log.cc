// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/nccl_driver/plugin_log.h"

#include <cstdio>
#include <mutex>

namespace optcast::tools::nccl_driver {

namespace {
constexpr char kWarn[] = "WARN ";
std::mutex g_mu;
std::vector<std::string> g_lines;
std::string g_last_warning;
}  // namespace

std::string FormatPluginLine(nccl::ncclDebugLogLevel level, const char* fmt, va_list ap) {
  char buf[4096];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  return std::string(level == nccl::NCCL_LOG_WARN ? kWarn : "INFO ") + buf;
}

void KeepPluginLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_lines.push_back(line);
  if (line.rfind(kWarn, 0) == 0) g_last_warning = line.substr(sizeof(kWarn) - 1);
}

std::vector<std::string> PluginLines() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_lines;
}

std::string LastPluginWarning() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_last_warning;
}

}  // namespace optcast::tools::nccl_driver
