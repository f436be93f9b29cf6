// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "optcast/job_id.h"

#include <sys/random.h>

#include <chrono>
#include <random>

namespace optcast {

JobId JobId::Random() {
  JobId id;
  if (getrandom(id.bytes.data(), id.bytes.size(), 0) != static_cast<ssize_t>(id.bytes.size())) {
    // getrandom only fails on ancient kernels; fall back to a time-seeded generator.
    std::mt19937_64 gen(std::random_device{}() ^
                        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
    for (auto& b : id.bytes) b = static_cast<uint8_t>(gen());
  }
  return id;
}

std::optional<JobId> JobId::FromHex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  JobId id;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < 16; ++i) {
    int hi = nibble(hex[2 * i]);
    int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    id.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return id;
}

std::string JobId::ToHex() const {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

}  // namespace optcast
