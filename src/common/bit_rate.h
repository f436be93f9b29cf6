// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Link rates as people write them for tc and switches: "500mbit", "25gbit", in bits per second.

#include <cstdint>
#include <optional>
#include <string>

namespace optcast {

// Parses "500mbit", "1gbit", "200Mbit", "750kbit", "1000000" (bit/s) between 100 kbit/s and
// 1000 gbit/s; nullopt when malformed or out of that range. tc's "bps" (bytes per second) is
// refused: too easy to misread.
std::optional<uint64_t> ParseBitRate(const std::string& text);
// 500000000 -> "500mbit" (for messages and tc).
std::string FormatBitRate(uint64_t bits);

}  // namespace optcast
