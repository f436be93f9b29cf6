// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// The chunk buffer pool in the steady state of a pipeline: buffers and the shared_ptr control
// blocks around them are reused, so a stream of chunks allocates nothing once warm.

#include "server/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace optcast::server {
namespace {

TEST(BufferPool, SteadyStreamReusesBuffersAndControlBlocks) {
  BufferPool pool;
  constexpr int kInFlight = 8;
  std::vector<std::shared_ptr<uint8_t>> window;
  // Warm-up: one window of chunks.
  for (int i = 0; i < kInFlight; ++i) window.push_back(pool.Get(64 * 1024));
  window.clear();
  const size_t blocks_after_warmup = pool.control_blocks_allocated();
  EXPECT_EQ(pool.outstanding_bytes(), 0u);
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < kInFlight; ++i) {
      auto b = pool.Get(48 * 1024 + i);  // same size class
      ASSERT_NE(b, nullptr);
      std::memset(b.get(), round & 0xff, 48 * 1024 + i);
      window.push_back(b);
      auto copy = b;  // a pending send holding the result, as the server does
    }
    window.clear();
  }
  EXPECT_EQ(pool.control_blocks_allocated(), blocks_after_warmup) << "control blocks were allocated while warm";
  EXPECT_EQ(pool.outstanding_bytes(), 0u);
  EXPECT_EQ(pool.cached_bytes(), static_cast<size_t>(kInFlight) * 64 * 1024);
}

TEST(BufferPool, BuffersMayOutliveThePool) {
  std::shared_ptr<uint8_t> survivor;
  {
    BufferPool pool;
    survivor = pool.Get(4096);
    auto released = pool.Get(4096);
  }
  std::memset(survivor.get(), 1, 4096);  // still valid memory (ASan checks)
  survivor.reset();
}

}  // namespace
}  // namespace optcast::server
