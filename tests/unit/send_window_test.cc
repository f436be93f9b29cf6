// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The client's window of chunks in flight per server link (client/send_window.h): it starts small
// on an idle link, opens by one chunk per window's worth of results, stops at the steady value,
// respects the byte limit, and starts small again once the link is idle.

#include "client/send_window.h"

#include <gtest/gtest.h>

#include <deque>
#include <vector>

namespace optcast::client {
namespace {

constexpr uint64_t kChunk = 32 * 1024;

// Fills the window with chunks of `bytes`; returns how many it took.
int Fill(SendWindow& w, std::deque<uint64_t>& inflight, uint64_t bytes = kChunk) {
  int sent = 0;
  while (w.HasRoom(bytes)) {
    w.OnSent(bytes);
    inflight.push_back(bytes);
    ++sent;
  }
  return sent;
}

void ReturnOne(SendWindow& w, std::deque<uint64_t>& inflight) {
  w.OnReturned(inflight.front());
  inflight.pop_front();
}

TEST(SteadyWindowChunks, TwoRoundsPerServerShareOfRanksPlusTwo) {
  EXPECT_EQ(SteadyWindowChunks(8, 8), 4);  // 2·1 + 2
  EXPECT_EQ(SteadyWindowChunks(8, 4), 6);  // 2·2 + 2
  EXPECT_EQ(SteadyWindowChunks(8, 3), 8);  // 2·ceil(8/3) + 2
  EXPECT_EQ(SteadyWindowChunks(2, 8), 4);  // fewer ranks than servers: still one round each way
  EXPECT_EQ(SteadyWindowChunks(8, 1), kMaxWindowChunks);
  EXPECT_EQ(SteadyWindowChunks(1, 1), 4);
  EXPECT_EQ(SteadyWindowChunks(0, 0), 4);  // nonsense in, a sane window out
}

TEST(SendWindow, StartsAtTheInitialWindow) {
  SendWindow w(0, 8);
  std::deque<uint64_t> inflight;
  EXPECT_EQ(Fill(w, inflight), kInitialWindowChunks);
  EXPECT_EQ(w.inflight(), kInitialWindowChunks);
  EXPECT_EQ(w.inflight_bytes(), kInitialWindowChunks * kChunk);
}

TEST(SendWindow, OpensByOneChunkPerWindowOfResultsUpToTheSteadyValue) {
  SendWindow w(0, 5);
  std::deque<uint64_t> inflight;
  Fill(w, inflight);
  // Keep the link busy: return one result, refill, and watch the limit.
  std::vector<int> limits;
  for (int i = 0; i < 20; ++i) {
    ReturnOne(w, inflight);
    Fill(w, inflight);
    limits.push_back(w.limit_chunks());
    EXPECT_EQ(w.inflight(), w.limit_chunks());
  }
  // 2 results at limit 2 -> 3; 3 more -> 4; 4 more -> 5; then it stays.
  EXPECT_EQ(limits[0], 2);
  EXPECT_EQ(limits[1], 3);
  EXPECT_EQ(limits[3], 3);
  EXPECT_EQ(limits[4], 4);
  EXPECT_EQ(limits[7], 4);
  EXPECT_EQ(limits[8], 5);
  EXPECT_EQ(limits.back(), 5);
}

TEST(SendWindow, StartsSmallAgainOnceIdle) {
  SendWindow w(0, 16);
  std::deque<uint64_t> inflight;
  Fill(w, inflight);
  for (int i = 0; i < 40; ++i) {
    ReturnOne(w, inflight);
    Fill(w, inflight);
  }
  ASSERT_GT(w.limit_chunks(), kInitialWindowChunks);
  while (!inflight.empty()) ReturnOne(w, inflight);
  EXPECT_EQ(w.inflight(), 0);
  EXPECT_EQ(w.inflight_bytes(), 0u);
  EXPECT_EQ(w.limit_chunks(), kInitialWindowChunks);
  EXPECT_EQ(Fill(w, inflight), kInitialWindowChunks);
}

TEST(SendWindow, TheByteLimitHoldsAboveTheMinimumChunks) {
  SendWindow w(0, kMaxWindowChunks);
  std::deque<uint64_t> inflight;
  const uint64_t big = kWindowBytes / 2;
  Fill(w, inflight, big);
  for (int i = 0; i < 100; ++i) {
    ReturnOne(w, inflight);
    Fill(w, inflight, big);
    EXPECT_LE(w.inflight_bytes(), kWindowBytes);
  }
  // Chunks larger than the byte window still go, kMinWindowChunks at a time.
  SendWindow huge(0, kMaxWindowChunks);
  std::deque<uint64_t> h;
  EXPECT_EQ(Fill(huge, h, 4 * kWindowBytes), kMinWindowChunks);
}

TEST(SendWindow, AFixedWindowDoesNotRamp) {
  SendWindow w(3, 16);
  std::deque<uint64_t> inflight;
  EXPECT_EQ(Fill(w, inflight, 4 * kWindowBytes), 3);
  for (int i = 0; i < 20; ++i) {
    ReturnOne(w, inflight);
    EXPECT_EQ(Fill(w, inflight), 1);
    EXPECT_EQ(w.inflight(), 3);
  }
}

}  // namespace
}  // namespace optcast::client
