// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <algorithm>
#include <cstdint>

namespace optcast {

struct Range {
  uint64_t begin = 0;
  uint64_t len = 0;
};

// Part j of [0, len) cut into `parts` contiguous parts; the first len % parts are one longer.
inline Range Shard(uint64_t len, int parts, int j) {
  const uint64_t p = static_cast<uint64_t>(parts);
  const uint64_t uj = static_cast<uint64_t>(j);
  const uint64_t base = len / p;
  const uint64_t extra = len % p;
  return Range{uj * base + std::min(uj, extra), base + (uj < extra ? 1 : 0)};
}

}  // namespace optcast
