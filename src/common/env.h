// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "optcast/status.h"

namespace optcast {

std::optional<std::string> GetEnv(const char* name);

// Parses an integer environment variable; returns `fallback` when unset, an error when malformed.
Status GetEnvInt(const char* name, int64_t fallback, int64_t* out);

// Parses a byte size such as "4096", "64K", "1M", "2G" (binary multiples).
std::optional<uint64_t> ParseByteSize(const std::string& text);

using Clock = std::chrono::steady_clock;

// A point in time after which a wait gives up.
struct Deadline {
  Clock::time_point at;
  static Deadline After(std::chrono::milliseconds d) { return {Clock::now() + d}; }
  bool Expired() const { return Clock::now() >= at; }
  // Milliseconds left, clamped to [0, INT32_MAX] for poll().
  int RemainingMs() const;
};

}  // namespace optcast
