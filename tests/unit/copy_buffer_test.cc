// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/copy_buffer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

namespace optcast::client {
namespace {

void FillAndCheck(const CopyBuffer& b, uint8_t seed) {
  for (uint64_t i = 0; i < b.size(); i += 4096) b.data()[i] = static_cast<uint8_t>(seed + i / 4096);
  b.data()[b.size() - 1] = seed;
  for (uint64_t i = 0; i + 1 < b.size(); i += 4096) ASSERT_EQ(b.data()[i], static_cast<uint8_t>(seed + i / 4096));
  ASSERT_EQ(b.data()[b.size() - 1], seed);
}

TEST(CopyBufferPool, SmallCopiesOfANewSizeReuseSlotsOnceTheFirstAreBack) {
  CopyBufferPool pool(4);
  std::vector<CopyBuffer> held;
  for (int i = 0; i < 9; ++i) {
    held.push_back(pool.Take(32 * 1024 + 1));
    ASSERT_GE(held.back().size(), 32u * 1024 + 1);
    ASSERT_TRUE(held.back().small());
    FillAndCheck(held.back(), static_cast<uint8_t>(i));
  }
  // Distinct memory for buffers held at once.
  for (size_t i = 0; i < held.size(); ++i) {
    for (size_t j = i + 1; j < held.size(); ++j) {
      EXPECT_TRUE(held[i].data() + held[i].size() <= held[j].data() ||
                  held[j].data() + held[j].size() <= held[i].data());
    }
  }
  const uint64_t made = pool.mappings_made();
  EXPECT_EQ(made, 1u) << "nine 64 KiB slots fit one 2 MiB slab";
  for (auto& b : held) pool.GiveBack(std::move(b));
  held.clear();
  for (int round = 0; round < 100; ++round) {
    CopyBuffer b = pool.Take(40 * 1024);
    FillAndCheck(b, static_cast<uint8_t>(round));
  }
  EXPECT_EQ(pool.mappings_made(), made);
}

TEST(CopyBufferPool, EverySmallSizeGetsASlotThatHoldsIt) {
  CopyBufferPool pool(4);
  for (uint64_t bytes : {uint64_t{1}, uint64_t{4095}, uint64_t{4096}, uint64_t{4097}, uint64_t{512} << 10,
                         (uint64_t{512} << 10) + 1, CopyBufferPool::kLargeBytes - 1}) {
    CopyBuffer b = pool.Take(bytes);
    ASSERT_TRUE(b.small()) << bytes;
    ASSERT_GE(b.size(), bytes);
    ASSERT_LT(b.size(), 2 * bytes + 4096) << bytes;
    FillAndCheck(b, static_cast<uint8_t>(bytes));
  }
  EXPECT_TRUE(pool.Take(CopyBufferPool::kLargeBytes).small() == false);
}

TEST(CopyBufferPool, LargeCopiesAreWholeHugePagesAndTheBestFittingSpareIsReused) {
  CopyBufferPool pool(4);
  CopyBuffer a = pool.Take(3 * 1024 * 1024);
  CopyBuffer b = pool.Take(8 * 1024 * 1024);
  ASSERT_FALSE(a.small());
  EXPECT_EQ(a.size(), 4u << 20);
  EXPECT_EQ(b.size(), 8u << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % kHugePageBytes, 0u);
  FillAndCheck(a, 1);
  FillAndCheck(b, 2);
  uint8_t* const a_data = a.data();
  pool.GiveBack(std::move(b));
  pool.GiveBack(std::move(a));
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(pool.large_spares(), 2u);
  CopyBuffer c = pool.Take(2 * 1024 * 1024 + 1);
  EXPECT_EQ(c.data(), a_data) << "the 4 MiB spare fits better than the 8 MiB one";
  CopyBuffer d = pool.Take(5 * 1024 * 1024);
  EXPECT_EQ(d.size(), 8u << 20);
  EXPECT_EQ(pool.mappings_made(), 2u);
  CopyBuffer e = pool.Take(9 * 1024 * 1024);
  EXPECT_EQ(pool.mappings_made(), 3u);
  EXPECT_EQ(e.size(), 10u << 20);
}

TEST(CopyBufferPool, AFullPoolKeepsItsLargestSpares) {
  CopyBufferPool pool(2);
  CopyBuffer s1 = pool.Take(1 << 20), s2 = pool.Take(2 << 20), s3 = pool.Take(6 << 20);
  pool.GiveBack(std::move(s1));
  pool.GiveBack(std::move(s2));
  pool.GiveBack(std::move(s3));  // the 2 MiB spare from s1 goes
  EXPECT_EQ(pool.large_spares(), 2u);
  CopyBuffer big = pool.Take(5 << 20);
  EXPECT_EQ(big.size(), 6u << 20);
  CopyBuffer mid = pool.Take(1 << 20);
  EXPECT_EQ(mid.size(), 2u << 20);
  EXPECT_EQ(pool.large_spares(), 0u);
  EXPECT_EQ(pool.mappings_made(), 3u);
}

TEST(CopyBufferPool, ABufferMayOutliveItsPool) {
  CopyBuffer small, large;
  {
    CopyBufferPool pool(4);
    small = pool.Take(100);
    large = pool.Take(1 << 20);
  }
  FillAndCheck(small, 7);
  FillAndCheck(large, 8);
  small = CopyBuffer();  // its slot goes back to slabs that only it still holds
  large = CopyBuffer();
  EXPECT_TRUE(small.empty() && large.empty());
}

}  // namespace
}  // namespace optcast::client
