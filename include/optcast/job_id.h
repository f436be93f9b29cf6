// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace optcast {

// Names a job on the reduction servers: every rank of one communicator uses the same id, and
// different communicators use different ids. 128 bits, so random ids do not collide.
struct JobId {
  std::array<uint8_t, 16> bytes{};

  static JobId Random();
  // 32 hex digits.
  static std::optional<JobId> FromHex(std::string_view hex);
  std::string ToHex() const;
  bool operator==(const JobId&) const = default;
};

}  // namespace optcast
