// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "nccl/logging.h"

#include <atomic>
#include <cstdio>

namespace optcast::nccl {

namespace {
std::atomic<ncclDebugLogger_t> g_logger{nullptr};
}  // namespace

void SetLogger(ncclDebugLogger_t logger) {
  if (logger != nullptr) g_logger.store(logger, std::memory_order_release);
}

void LogLine(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const std::string& text) {
  ncclDebugLogger_t logger = g_logger.load(std::memory_order_acquire);
  if (logger != nullptr) {
    logger(level, flags, file, line, "NET/Optcast : %s", text.c_str());
  } else if (level == NCCL_LOG_WARN) {
    std::fprintf(stderr, "NET/Optcast WARN %s\n", text.c_str());
  }
}

}  // namespace optcast::nccl
