// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The float32 wire conversions (reduce/wire_convert.h) against the scalar conversions of half.h:
// every 16-bit pattern widened, and float32 patterns of every kind (normal, subnormal, the
// rounding ties, infinities, NaNs with payloads) narrowed, at every length a vector loop has a
// tail for.

#include "reduce/wire_convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "reduce/half.h"

namespace optcast::reduce {
namespace {

uint16_t ScalarNarrow(DataType wire, float v) {
  return wire == DataType::kBFloat16 ? FloatToBFloat16(v) : FloatToHalf(v);
}
float ScalarWiden(DataType wire, uint16_t v) {
  return wire == DataType::kBFloat16 ? BFloat16ToFloat(v) : HalfToFloat(v);
}

std::vector<float> Patterns() {
  std::vector<float> v;
  for (uint32_t bits : {0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x3f800000u, 0x3f808000u,
                        0x3f818000u, 0x3f80ffffu, 0x477fe000u, 0x477ff000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                        0x7f800001u, 0x7fc00000u, 0xffc12345u, 0x33000000u, 0x33000001u, 0x387fc000u}) {
    v.push_back(std::bit_cast<float>(bits));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  // Ties of both formats: the low 16 (bfloat16) or 13 (float16) bits exactly half way.
  for (int i = 0; i < 4000; ++i) {
    const uint32_t r = static_cast<uint32_t>(rng());
    v.push_back(std::bit_cast<float>((r & 0xffff0000u) | 0x8000u));
    v.push_back(std::bit_cast<float>((r & 0xbfffe000u) | 0x1000u));
  }
  return v;
}

class WireConvert : public ::testing::TestWithParam<DataType> {};

TEST_P(WireConvert, EverySixteenBitPatternWidensAsTheScalarConversion) {
  const DataType wire = GetParam();
  std::vector<uint16_t> in(65536);
  for (uint32_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint16_t>(i);
  std::vector<float> out(in.size());
  ASSERT_TRUE(WidenToFloat32(wire, in.data(), out.data(), in.size()).ok());
  for (uint32_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(ScalarWiden(wire, in[i]))) << std::hex << i;
  }
}

TEST_P(WireConvert, Float32NarrowsAsTheScalarConversionAtEveryTail) {
  const DataType wire = GetParam();
  const std::vector<float> in = Patterns();
  for (size_t len : {size_t{1}, size_t{3}, size_t{7}, size_t{15}, size_t{17}, size_t{33}, in.size()}) {
    std::vector<uint16_t> out(len + 1, 0xabcd);
    ASSERT_TRUE(NarrowFloat32(wire, in.data(), out.data(), len).ok());
    for (size_t i = 0; i < len; ++i) {
      ASSERT_EQ(out[i], ScalarNarrow(wire, in[i]))
          << "len " << len << " [" << i << "] = " << std::hex << std::bit_cast<uint32_t>(in[i]);
    }
    EXPECT_EQ(out[len], 0xabcd) << "wrote past the end";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, WireConvert, ::testing::Values(DataType::kBFloat16, DataType::kFloat16),
                         [](const auto& info) { return std::string(DataTypeName(info.param)); });

TEST(WireConvertTypes, OnlyTheSixteenBitFloatsAreWireTypes) {
  float f = 1.0f;
  uint16_t h = 0;
  EXPECT_EQ(NarrowFloat32(DataType::kFloat32, &f, &h, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(WidenToFloat32(DataType::kInt32, &h, &f, 1).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace optcast::reduce
