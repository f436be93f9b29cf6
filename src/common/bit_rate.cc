// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "common/bit_rate.h"

#include <cctype>
#include <cmath>

namespace optcast {

std::optional<uint64_t> ParseBitRate(const std::string& text) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(t, &pos);
  } catch (...) {
    return std::nullopt;
  }
  const std::string unit = t.substr(pos);
  double mult = 0;
  if (unit.empty() || unit == "bit")
    mult = 1;
  else if (unit == "kbit")
    mult = 1e3;
  else if (unit == "mbit")
    mult = 1e6;
  else if (unit == "gbit")
    mult = 1e9;
  else
    return std::nullopt;
  const double bits = value * mult;
  if (!(bits >= 1e5) || bits > 1e12) return std::nullopt;
  return static_cast<uint64_t>(std::llround(bits));
}

std::string FormatBitRate(uint64_t bits) {
  if (bits % 1'000'000'000 == 0) return std::to_string(bits / 1'000'000'000) + "gbit";
  if (bits % 1'000'000 == 0) return std::to_string(bits / 1'000'000) + "mbit";
  if (bits % 1'000 == 0) return std::to_string(bits / 1'000) + "kbit";
  return std::to_string(bits) + "bit";
}

}  // namespace optcast
