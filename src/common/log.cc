// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace optcast {

spdlog::logger& Log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    // The registry lives in the shared libspdlog: a host process (or an earlier load of the NCCL
    // plugin) may have registered the name already.
    auto l = spdlog::get("optcast");
    if (!l) l = spdlog::stderr_color_mt("optcast");
    l->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [optcast %P] [%^%l%$] %v");
    const char* level = std::getenv("OPTCAST_LOG_LEVEL");
    l->set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
    return l;
  }();
  return *logger;
}

}  // namespace optcast
