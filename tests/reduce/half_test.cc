// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "reduce/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>

#include "reference.h"

namespace optcast::reduce {
namespace {

using reference::Decode;
using reference::IsNaNBits;
using reference::kBFloat16;
using reference::kBinary16;
using reference::QuietBit;
using reference::RoundAndEncode;

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(HalfToFloat, KnownBitPatterns) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xbc00), -1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);                      // largest finite
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));         // smallest normal
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));         // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(Bits(HalfToFloat(0x0000)), 0x00000000u);
  EXPECT_EQ(Bits(HalfToFloat(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(HalfToFloat(0x7c00), INFINITY);
  EXPECT_EQ(HalfToFloat(0xfc00), -INFINITY);
  // NaN: sign and payload kept, quiet bit set (a signalling NaN comes out quiet).
  EXPECT_EQ(Bits(HalfToFloat(0x7e00)), 0x7fc00000u);
  EXPECT_EQ(Bits(HalfToFloat(0x7c01)), 0x7fc02000u);
  EXPECT_EQ(Bits(HalfToFloat(0xfe01)), 0xffc02000u);
}

TEST(FloatToHalf, KnownValuesAndTiesToEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);  // just below the threshold
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);                        // tie between 0x7bff (odd) and inf: rounds to inf
  EXPECT_EQ(FloatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);
  EXPECT_EQ(FloatToHalf(FLT_MAX), 0x7c00);
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xfc00);
  // Ties in the normal range: 1 + 2^-11 is halfway between 0x3c00 (even) and 0x3c01.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // 0x3c01 odd -> 0x3c02
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  // Subnormals and underflow: the step is 2^-24.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0 -> even (0)
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);                      // tie 1..2 -> even (2)
  EXPECT_EQ(FloatToHalf(5 * std::ldexp(1.0f, -25)), 0x0002);                      // tie 2..3 -> even (2)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // into normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(FloatToHalf(FromBits(0x00000001)), 0x0000);  // float subnormal
  // NaN stays NaN with its sign, quiet bit set.
  EXPECT_EQ(FloatToHalf(FromBits(0x7fc00000)), 0x7e00);
  EXPECT_EQ(FloatToHalf(FromBits(0xffc00000)), 0xfe00);
  EXPECT_EQ(FloatToHalf(FromBits(0x7f800001)), 0x7e00);  // payload only in dropped bits
  EXPECT_EQ(FloatToHalf(FromBits(0x7fc02000)), 0x7e01);  // leading payload kept
}

TEST(Half, AllBitPatternsDecodeAndRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = HalfToFloat(h);
    if (IsNaNBits(kBinary16, h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      ASSERT_EQ(FloatToHalf(f), h | QuietBit(kBinary16)) << std::hex << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), Decode(kBinary16, h)) << std::hex << i;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << i;
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << i;
  }
}

// Rounding is decided at the midpoints between neighbours: check each one, and the floats just
// either side of it, for every pair of adjacent finite halves of both signs.
TEST(FloatToHalf, MatchesReferenceAroundEveryMidpoint) {
  for (uint32_t i = 0; i < 0x7c00; ++i) {
    const double lower = Decode(kBinary16, static_cast<uint16_t>(i));
    const double upper = i + 1 == 0x7c00 ? 65536.0 : Decode(kBinary16, static_cast<uint16_t>(i + 1));
    const float mid = static_cast<float>((lower + upper) / 2);  // exact: 12 significant bits
    for (const float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), static_cast<float>(lower)}) {
      ASSERT_EQ(FloatToHalf(f), RoundAndEncode(kBinary16, f)) << f;
      ASSERT_EQ(FloatToHalf(-f), RoundAndEncode(kBinary16, -f)) << -f;
    }
  }
}

TEST(FloatToHalf, MatchesReferenceOnRandomFloats) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 1'000'000; ++i) {
    const float f = FromBits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) {
      const uint16_t h = FloatToHalf(f);
      ASSERT_TRUE(IsNaNBits(kBinary16, h) && (h & QuietBit(kBinary16))) << std::hex << Bits(f);
      ASSERT_EQ(h >> 15, Bits(f) >> 31);
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), RoundAndEncode(kBinary16, f)) << std::hex << Bits(f);
  }
}

TEST(BFloat16ToFloat, KnownBitPatterns) {
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(BFloat16ToFloat(0x7f7f), 0x1.fep127f);  // largest finite
  EXPECT_EQ(BFloat16ToFloat(0x0080), std::ldexp(1.0f, -126));
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(Bits(BFloat16ToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(BFloat16ToFloat(0x7f80), INFINITY);
  EXPECT_EQ(BFloat16ToFloat(0xff80), -INFINITY);
  // Widening is the exact 16-bit shift, NaN bits included.
  EXPECT_EQ(Bits(BFloat16ToFloat(0x7fc1)), 0x7fc10000u);
  EXPECT_EQ(Bits(BFloat16ToFloat(0x7f81)), 0x7f810000u);
}

TEST(FloatToBFloat16, KnownValuesAndTiesToEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even
  EXPECT_EQ(FloatToBFloat16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(FLT_MAX), 0x7f80);  // above 0x7f7f + half ulp: overflows
  EXPECT_EQ(FloatToBFloat16(0x1.fep127f), 0x7f7f);
  EXPECT_EQ(FloatToBFloat16(INFINITY), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-INFINITY), 0xff80);
  EXPECT_EQ(FloatToBFloat16(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(FloatToBFloat16(std::ldexp(1.0f, -134)), 0x0000);  // tie with 0 -> even
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7fc00000)), 0x7fc0);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7f800001)), 0x7fc0);  // sNaN: quiet, never inf
  EXPECT_EQ(FloatToBFloat16(FromBits(0xff810000)), 0xffc1);  // sign and payload kept
}

TEST(BFloat16, AllBitPatternsDecodeAndRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    const float f = BFloat16ToFloat(b);
    ASSERT_EQ(Bits(f), i << 16);
    if (IsNaNBits(kBFloat16, b)) {
      ASSERT_EQ(FloatToBFloat16(f), b | QuietBit(kBFloat16)) << std::hex << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), Decode(kBFloat16, b)) << std::hex << i;
    ASSERT_EQ(FloatToBFloat16(f), b) << std::hex << i;
  }
}

TEST(FloatToBFloat16, MatchesReferenceAroundEveryMidpoint) {
  for (uint32_t i = 0; i < 0x7f80; ++i) {
    const uint32_t lower_bits = i << 16;
    const uint32_t mid_bits = lower_bits | 0x8000u;  // halfway to the next bfloat16
    for (const uint32_t u : {lower_bits, mid_bits, mid_bits - 1, mid_bits + 1}) {
      for (const uint32_t signed_u : {u, u | 0x80000000u}) {
        const float f = FromBits(signed_u);
        ASSERT_EQ(FloatToBFloat16(f), RoundAndEncode(kBFloat16, f)) << std::hex << signed_u;
      }
    }
  }
}

TEST(FloatToBFloat16, MatchesReferenceOnRandomFloats) {
  std::mt19937 rng(678);
  for (int i = 0; i < 1'000'000; ++i) {
    const float f = FromBits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) {
      const uint16_t b = FloatToBFloat16(f);
      ASSERT_TRUE(IsNaNBits(kBFloat16, b) && (b & QuietBit(kBFloat16))) << std::hex << Bits(f);
      ASSERT_EQ(b >> 15, Bits(f) >> 31);
      continue;
    }
    ASSERT_EQ(FloatToBFloat16(f), RoundAndEncode(kBFloat16, f)) << std::hex << Bits(f);
  }
}

}  // namespace
}  // namespace optcast::reduce
