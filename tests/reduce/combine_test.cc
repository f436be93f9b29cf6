// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "reduce/combine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "reference.h"

namespace optcast::reduce {
namespace {

using reference::Decode;
using reference::Encode;
using reference::Format;
using reference::kBFloat16;
using reference::kBinary16;
using reference::PlainMax;
using reference::PlainMin;
using reference::RoundAndEncode;
using reference::UlpDistance;

using Bytes = std::vector<uint8_t>;
template <typename T>
using Sources = std::vector<std::vector<T>>;  // [source][element]

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
                                  DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,    DataType::kUInt32,
                                  DataType::kInt64,   DataType::kUInt64};
constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg};
constexpr DataType kIntegerTypes[] = {DataType::kInt8,   DataType::kUInt8, DataType::kInt32,
                                      DataType::kUInt32, DataType::kInt64, DataType::kUInt64};
constexpr RedOp kBitwiseOps[] = {RedOp::kBand, RedOp::kBor, RedOp::kBxor};
// 5 and 13 add the partial second/third passes of the 4-sources-per-pass kernel.
constexpr int kSourceCounts[] = {1, 2, 3, 4, 5, 8, 13};
// Scalar tail only; 64-element sub-blocks + tail; full 1024 blocks + sub-block + tail; blocks +
// tail.
constexpr size_t kCounts[] = {1, 7, 1023, 1093, 4099};

template <typename T>
Bytes ToBytes(const std::vector<T>& values) {
  Bytes bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<T> FromBytes(const Bytes& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// Combines out of place and checks what must hold for every type and op: a second run gives the
// same bytes, and so does an in-place run (dst == srcs[0]) on a copy of the first source.
template <typename T>
std::vector<T> CombineChecked(DataType dtype, RedOp op, const Sources<T>& sources) {
  const int nsrc = static_cast<int>(sources.size());
  const size_t count = sources[0].size();
  std::vector<const void*> ptrs;
  for (const auto& s : sources) ptrs.push_back(s.data());

  std::vector<T> out(count);
  const Status status = Combine(dtype, op, ptrs.data(), nsrc, out.data(), count);
  EXPECT_TRUE(status.ok()) << status.ToString();

  std::vector<T> again(count);
  EXPECT_TRUE(Combine(dtype, op, ptrs.data(), nsrc, again.data(), count).ok());
  EXPECT_TRUE(ToBytes(again) == ToBytes(out)) << "second run is not bitwise identical";

  std::vector<T> in_place = sources[0];
  ptrs[0] = in_place.data();
  EXPECT_TRUE(Combine(dtype, op, ptrs.data(), nsrc, in_place.data(), count).ok());
  EXPECT_TRUE(ToBytes(in_place) == ToBytes(out)) << "in-place result differs";
  return out;
}

// ---- Integers: exact references in __int128 / unsigned __int128. ----

template <typename T>
T IntegerReference(RedOp op, const Sources<T>& sources, size_t i) {
  const int n = static_cast<int>(sources.size());
  switch (op) {
    case RedOp::kSum: {
      __int128 sum = 0;
      for (const auto& s : sources) sum += s[i];
      return static_cast<T>(sum);  // modular narrowing = two's complement wrap-around
    }
    case RedOp::kProd: {
      unsigned __int128 product = 1;
      for (const auto& s : sources) {
        product = (product * static_cast<uint64_t>(s[i])) & std::numeric_limits<uint64_t>::max();
      }
      return static_cast<T>(product);
    }
    case RedOp::kMin: {
      T m = sources[0][i];
      for (const auto& s : sources) m = std::min(m, s[i]);
      return m;
    }
    case RedOp::kMax: {
      T m = sources[0][i];
      for (const auto& s : sources) m = std::max(m, s[i]);
      return m;
    }
    case RedOp::kAvg: {
      __int128 sum = 0;
      for (const auto& s : sources) sum += s[i];
      // Contract: the sum is formed in 64-bit arithmetic (it wraps only for 64-bit elements).
      if constexpr (std::is_signed_v<T>) {
        return static_cast<T>(static_cast<int64_t>(sum) / n);
      } else {
        return static_cast<T>(static_cast<uint64_t>(sum) / static_cast<uint64_t>(n));
      }
    }
    // Bitwise: the 64-bit pattern of each value, combined and cut back to the element's width.
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor: {
      uint64_t bits = static_cast<uint64_t>(sources[0][i]);
      for (int k = 1; k < n; ++k) {
        const uint64_t v = static_cast<uint64_t>(sources[k][i]);
        bits = op == RedOp::kBand ? (bits & v) : op == RedOp::kBor ? (bits | v) : (bits ^ v);
      }
      return static_cast<T>(bits);
    }
  }
  return 0;
}

template <typename T>
Sources<T> RandomIntegers(int nsrc, size_t count, std::mt19937_64& rng) {
  Sources<T> sources(nsrc, std::vector<T>(count));
  for (auto& s : sources) {
    for (auto& v : s) v = static_cast<T>(rng());  // every bit pattern, so sums and products wrap
  }
  return sources;
}

template <typename T>
void CheckIntegerCombine(DataType dtype, RedOp op, int nsrc, size_t count, std::mt19937_64& rng) {
  const Sources<T> sources = RandomIntegers<T>(nsrc, count, rng);
  const std::vector<T> got = CombineChecked(dtype, op, sources);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(got[i], IntegerReference(op, sources, i)) << "element " << i;
  }
}

// Bitwise ops: uniform bits would make band nearly all zeros and bor nearly all ones with many
// sources. Each source keeps or drops each bit with a bias that leaves both values common.
template <typename T>
void CheckBitwiseCombine(DataType dtype, RedOp op, int nsrc, size_t count, std::mt19937_64& rng) {
  Sources<T> sources(nsrc, std::vector<T>(count));
  for (auto& s : sources) {
    for (auto& v : s) {
      const uint64_t a = rng(), b = rng(), c = rng();
      v = static_cast<T>(op == RedOp::kBand ? (a | b | c) : op == RedOp::kBor ? (a & b & c) : a);
    }
  }
  const std::vector<T> got = CombineChecked(dtype, op, sources);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(got[i], IntegerReference(op, sources, i)) << "element " << i;
  }
}

// ---- float32/float64: reference in a wider type, error bounded by the sequential order. ----

template <typename T>
void CheckFloatCombine(DataType dtype, RedOp op, int nsrc, size_t count, std::mt19937_64& rng) {
  // long double (x87, 64-bit mantissa) for float64 so the reference is strictly more precise.
  using Wide = std::conditional_t<std::is_same_v<T, double>, long double, double>;
  const Wide unit_roundoff = std::numeric_limits<T>::epsilon() / 2;
  std::uniform_real_distribution<T> magnitude(0.5, 2.0);  // prod of 13 stays far from overflow
  Sources<T> sources(nsrc, std::vector<T>(count));
  for (auto& s : sources) {
    for (auto& v : s) v = (rng() & 1) ? magnitude(rng) : -magnitude(rng);
  }
  const std::vector<T> got = CombineChecked(dtype, op, sources);

  for (size_t i = 0; i < count; ++i) {
    Wide sum = 0, abs_sum = 0, product = 1;
    T min = sources[0][i], max = sources[0][i];
    for (const auto& s : sources) {
      sum += s[i];
      abs_sum += std::fabs(s[i]);
      product *= s[i];
      min = PlainMin(min, s[i]);
      max = PlainMax(max, s[i]);
    }
    const Wide value = got[i];
    // Sequential summation error <= (n-1) u sum|x|; avg adds one rounding; prod (n-1) u |p|.
    switch (op) {
      case RedOp::kSum: ASSERT_LE(std::fabs(value - sum), nsrc * unit_roundoff * abs_sum) << "element " << i; break;
      case RedOp::kAvg:
        ASSERT_LE(std::fabs(value - sum / nsrc), (nsrc + 1) * unit_roundoff * abs_sum / nsrc) << "element " << i;
        break;
      case RedOp::kProd:
        ASSERT_LE(std::fabs(value - product), (nsrc + 1) * unit_roundoff * std::fabs(product)) << "element " << i;
        break;
      case RedOp::kMin: ASSERT_EQ(got[i], min) << "element " << i; break;
      case RedOp::kMax: ASSERT_EQ(got[i], max) << "element " << i; break;
      case RedOp::kBand:
      case RedOp::kBor:
      case RedOp::kBxor: FAIL() << "bitwise ops are not defined for floats";
    }
  }
}

// ---- float16/bfloat16: float64 reference rounded once to the type. ----
//
// Data lie on a grid (k * 2^-8 with |k| <= 1024 for float16, k * 2^-4 with |k| <= 128 for
// bfloat16) so every partial sum of up to 13 sources is exact in float32. Then:
// - sum, min, max: the float32 accumulator equals the exact value; rounding once must give the
//   reference bit for bit. Asserted exact.
// - avg: sum / n is a single float32 division of an exact sum; it is never close enough to a
//   rounding midpoint of the 16-bit type for the float32 rounding to matter. Asserted exact.
// - prod: products of 3+ values round in float32 before the final rounding, so the result may be
//   one step away from the reference when it sits near a midpoint. Asserted within 1 ulp.
void CheckHalfCombine(const Format& format, DataType dtype, RedOp op, int nsrc, size_t count, std::mt19937_64& rng) {
  const bool is_binary16 = dtype == DataType::kFloat16;
  const int grid_exponent = is_binary16 ? -8 : -4;
  const int max_k = is_binary16 ? 1024 : 128;
  std::uniform_int_distribution<int> k_dist(-max_k, max_k);
  Sources<uint16_t> sources(nsrc, std::vector<uint16_t>(count));
  for (auto& s : sources) {
    for (auto& v : s) v = Encode(format, std::ldexp(k_dist(rng), grid_exponent));
  }
  const std::vector<uint16_t> got = CombineChecked(dtype, op, sources);

  for (size_t i = 0; i < count; ++i) {
    double sum = 0, product = 1;
    double min = Decode(format, sources[0][i]), max = min;
    for (const auto& s : sources) {
      const double v = Decode(format, s[i]);
      sum += v;
      product *= v;
      min = PlainMin(min, v);
      max = PlainMax(max, v);
    }
    double exact = 0;
    switch (op) {
      case RedOp::kSum: exact = sum; break;
      case RedOp::kProd: exact = product; break;
      case RedOp::kMin: exact = min; break;
      case RedOp::kMax: exact = max; break;
      case RedOp::kAvg: exact = sum / nsrc; break;
      case RedOp::kBand:
      case RedOp::kBor:
      case RedOp::kBxor: FAIL() << "bitwise ops are not defined for floats";
    }
    const uint16_t expected = RoundAndEncode(format, exact);
    if (op == RedOp::kProd) {
      ASSERT_LE(UlpDistance(got[i], expected), 1)
          << "element " << i << std::hex << " got 0x" << got[i] << " want 0x" << expected;
    } else {
      ASSERT_EQ(got[i], expected) << "element " << i << " exact " << exact;
    }
  }
}

void CheckCombine(DataType dtype, RedOp op, int nsrc, size_t count, std::mt19937_64& rng) {
  switch (dtype) {
    case DataType::kFloat32: return CheckFloatCombine<float>(dtype, op, nsrc, count, rng);
    case DataType::kFloat64: return CheckFloatCombine<double>(dtype, op, nsrc, count, rng);
    case DataType::kFloat16: return CheckHalfCombine(kBinary16, dtype, op, nsrc, count, rng);
    case DataType::kBFloat16: return CheckHalfCombine(kBFloat16, dtype, op, nsrc, count, rng);
    case DataType::kInt8: return CheckIntegerCombine<int8_t>(dtype, op, nsrc, count, rng);
    case DataType::kUInt8: return CheckIntegerCombine<uint8_t>(dtype, op, nsrc, count, rng);
    case DataType::kInt32: return CheckIntegerCombine<int32_t>(dtype, op, nsrc, count, rng);
    case DataType::kUInt32: return CheckIntegerCombine<uint32_t>(dtype, op, nsrc, count, rng);
    case DataType::kInt64: return CheckIntegerCombine<int64_t>(dtype, op, nsrc, count, rng);
    case DataType::kUInt64: return CheckIntegerCombine<uint64_t>(dtype, op, nsrc, count, rng);
  }
}

using TypeAndOp = std::tuple<DataType, RedOp>;

class CombineTypeOpTest : public ::testing::TestWithParam<TypeAndOp> {};

TEST_P(CombineTypeOpTest, MatchesIndependentReference) {
  const auto [dtype, op] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(dtype) * 100 + static_cast<uint64_t>(op));
  for (const int nsrc : kSourceCounts) {
    for (const size_t count : kCounts) {
      SCOPED_TRACE("nsrc=" + std::to_string(nsrc) + " count=" + std::to_string(count));
      CheckCombine(dtype, op, nsrc, count, rng);
      if (HasFailure()) return;  // one failing shape is enough output
    }
  }
}

// ---- Accumulate: one ring step, rounded once per step. ----
//
// Arbitrary finite inputs here. For two operands of a format the exact result rounded to a wider
// format with >= 2p+2 bits and then to the format equals rounding once (float32 has 24 >= 2*11+2
// bits, float64 has 53 >= 2*24+2), so float16/bfloat16/float32 must match a float64 reference
// rounded once, bit for bit.

uint16_t RandomFinite16(const Format& format, std::mt19937_64& rng) {
  while (true) {
    const uint16_t bits = static_cast<uint16_t>(rng());
    const uint32_t exponent = (bits >> (format.precision - 1)) & ((1u << format.exponent_bits) - 1);
    if (exponent != (1u << format.exponent_bits) - 1) return bits;
  }
}

template <typename T>
T RandomFiniteFloat(std::mt19937_64& rng) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  while (true) {
    const T v = std::bit_cast<T>(static_cast<Bits>(rng()));
    if (std::isfinite(v)) return v;
  }
}

template <typename T>
T ApplyOp(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return a + b;
    case RedOp::kProd: return a * b;
    case RedOp::kMin: return PlainMin(a, b);
    case RedOp::kMax: return PlainMax(a, b);
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor: break;  // not defined for floats
  }
  return a;
}

template <typename T, typename Reference>
void CheckAccumulate(DataType dtype, RedOp op, std::vector<T> dst, const std::vector<T>& src, Reference reference) {
  const std::vector<T> before = dst;
  const Status status = Accumulate(dtype, op, dst.data(), src.data(), dst.size());
  ASSERT_TRUE(status.ok()) << status.ToString();
  for (size_t i = 0; i < dst.size(); ++i) {
    const T expected = reference(before[i], src[i]);
    ASSERT_EQ(std::memcmp(&dst[i], &expected, sizeof(T)), 0)
        << "element " << i << ": " << +before[i] << " op " << +src[i] << " gave " << +dst[i] << ", want " << +expected;
  }
}

template <typename T>
void CheckIntegerAccumulate(DataType dtype, RedOp op, size_t count, std::mt19937_64& rng) {
  Sources<T> operands = RandomIntegers<T>(2, count, rng);
  const RedOp step_op = op == RedOp::kAvg ? RedOp::kSum : op;  // avg is a sum until the end
  CheckAccumulate<T>(dtype, op, operands[0], operands[1], [&](T a, T b) {
    return IntegerReference<T>(step_op, Sources<T>{{a}, {b}}, 0);
  });
}

template <typename T>
void CheckFloatAccumulate(DataType dtype, RedOp op, size_t count, std::mt19937_64& rng) {
  std::vector<T> dst(count), src(count);
  for (size_t i = 0; i < count; ++i) {
    dst[i] = RandomFiniteFloat<T>(rng);
    src[i] = RandomFiniteFloat<T>(rng);
  }
  CheckAccumulate<T>(dtype, op, dst, src, [&](T a, T b) {
    return static_cast<T>(ApplyOp<double>(op, a, b));  // for float64 this is the definition
  });
}

void CheckHalfAccumulate(const Format& format, DataType dtype, RedOp op, size_t count, std::mt19937_64& rng) {
  std::vector<uint16_t> dst(count), src(count);
  for (size_t i = 0; i < count; ++i) {
    dst[i] = RandomFinite16(format, rng);
    src[i] = RandomFinite16(format, rng);
  }
  CheckAccumulate<uint16_t>(dtype, op, dst, src, [&](uint16_t a, uint16_t b) {
    return RoundAndEncode(format, ApplyOp(op, Decode(format, a), Decode(format, b)));
  });
}

TEST_P(CombineTypeOpTest, AccumulateIsOneRoundedStep) {
  const auto [dtype, op] = GetParam();
  std::mt19937_64 rng(7 + static_cast<uint64_t>(dtype) * 100 + static_cast<uint64_t>(op));
  for (const size_t count : kCounts) {
    SCOPED_TRACE("count=" + std::to_string(count));
    switch (dtype) {
      case DataType::kFloat32: CheckFloatAccumulate<float>(dtype, op, count, rng); break;
      case DataType::kFloat64: CheckFloatAccumulate<double>(dtype, op, count, rng); break;
      case DataType::kFloat16: CheckHalfAccumulate(kBinary16, dtype, op, count, rng); break;
      case DataType::kBFloat16: CheckHalfAccumulate(kBFloat16, dtype, op, count, rng); break;
      case DataType::kInt8: CheckIntegerAccumulate<int8_t>(dtype, op, count, rng); break;
      case DataType::kUInt8: CheckIntegerAccumulate<uint8_t>(dtype, op, count, rng); break;
      case DataType::kInt32: CheckIntegerAccumulate<int32_t>(dtype, op, count, rng); break;
      case DataType::kUInt32: CheckIntegerAccumulate<uint32_t>(dtype, op, count, rng); break;
      case DataType::kInt64: CheckIntegerAccumulate<int64_t>(dtype, op, count, rng); break;
      case DataType::kUInt64: CheckIntegerAccumulate<uint64_t>(dtype, op, count, rng); break;
    }
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, CombineTypeOpTest,
                         ::testing::Combine(::testing::ValuesIn(kAllTypes), ::testing::ValuesIn(kAllOps)),
                         [](const ::testing::TestParamInfo<TypeAndOp>& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
                                  RedOpName(std::get<1>(info.param));
                         });

// ---- FinishAverage: one division per element, truncating for integers. ----

constexpr int kDivisors[] = {1, 2, 3, 7, 8, 1000};

template <typename T, typename Reference>
void CheckFinishAverage(DataType dtype, const std::vector<T>& values, Reference reference) {
  for (const int divisor : kDivisors) {
    SCOPED_TRACE("divisor=" + std::to_string(divisor));
    std::vector<T> buf = values;
    const Status status = FinishAverage(dtype, buf.data(), buf.size(), divisor);
    ASSERT_TRUE(status.ok()) << status.ToString();
    for (size_t i = 0; i < buf.size(); ++i) {
      const T expected = reference(values[i], divisor);
      ASSERT_EQ(std::memcmp(&buf[i], &expected, sizeof(T)), 0)
          << "element " << i << ": " << +values[i] << " / " << divisor << " gave " << +buf[i] << ", want " << +expected;
    }
  }
}

template <typename T>
void CheckIntegerFinishAverage(DataType dtype, std::mt19937_64& rng) {
  CheckFinishAverage<T>(dtype, RandomIntegers<T>(1, 1093, rng)[0], [](T v, int d) {
    if constexpr (std::is_signed_v<T>)
      return static_cast<T>(static_cast<int64_t>(v) / d);
    else
      return static_cast<T>(static_cast<uint64_t>(v) / static_cast<uint64_t>(d));
  });
}

template <typename T>
void CheckFloatFinishAverage(DataType dtype, std::mt19937_64& rng) {
  std::vector<T> values(1093);
  for (auto& v : values) v = RandomFiniteFloat<T>(rng);
  CheckFinishAverage<T>(dtype, values, [](T v, int d) { return static_cast<T>(static_cast<double>(v) / d); });
}

void CheckHalfFinishAverage(const Format& format, DataType dtype, std::mt19937_64& rng) {
  std::vector<uint16_t> values(1093);
  for (auto& v : values) v = RandomFinite16(format, rng);
  // The divisors are exact in both 16-bit formats, so float32 division then rounding equals
  // rounding the exact quotient once.
  CheckFinishAverage<uint16_t>(dtype, values,
                               [&](uint16_t v, int d) { return RoundAndEncode(format, Decode(format, v) / d); });
}

class FinishAverageTest : public ::testing::TestWithParam<DataType> {};

TEST_P(FinishAverageTest, DividesOnceWithTheTypeRounding) {
  const DataType dtype = GetParam();
  std::mt19937_64 rng(99 + static_cast<uint64_t>(dtype));
  switch (dtype) {
    case DataType::kFloat32: return CheckFloatFinishAverage<float>(dtype, rng);
    case DataType::kFloat64: return CheckFloatFinishAverage<double>(dtype, rng);
    case DataType::kFloat16: return CheckHalfFinishAverage(kBinary16, dtype, rng);
    case DataType::kBFloat16: return CheckHalfFinishAverage(kBFloat16, dtype, rng);
    case DataType::kInt8: return CheckIntegerFinishAverage<int8_t>(dtype, rng);
    case DataType::kUInt8: return CheckIntegerFinishAverage<uint8_t>(dtype, rng);
    case DataType::kInt32: return CheckIntegerFinishAverage<int32_t>(dtype, rng);
    case DataType::kUInt32: return CheckIntegerFinishAverage<uint32_t>(dtype, rng);
    case DataType::kInt64: return CheckIntegerFinishAverage<int64_t>(dtype, rng);
    case DataType::kUInt64: return CheckIntegerFinishAverage<uint64_t>(dtype, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, FinishAverageTest, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(DataTypeName(info.param));
                         });

// ---- Specific semantics, spelled out. ----

template <typename T>
std::vector<T> CombineValues(DataType dtype, RedOp op, const std::vector<T>& per_source) {
  Sources<T> sources;
  for (const T v : per_source) sources.push_back({v});
  return CombineChecked(dtype, op, sources);
}

TEST(CombineSemantics, IntegerAverageTruncatesTowardZero) {
  EXPECT_EQ(CombineValues<int32_t>(DataType::kInt32, RedOp::kAvg, {-7, 0})[0], -3);
  EXPECT_EQ(CombineValues<int32_t>(DataType::kInt32, RedOp::kAvg, {7, 0})[0], 3);
  EXPECT_EQ(CombineValues<int32_t>(DataType::kInt32, RedOp::kAvg, {-1, 0, 0})[0], 0);
  EXPECT_EQ(CombineValues<int8_t>(DataType::kInt8, RedOp::kAvg, {-128, -128, -127})[0], -127);
}

TEST(CombineSemantics, IntegerAverageSumsIn64Bits) {
  // Narrow types cannot overflow the 64-bit sum...
  EXPECT_EQ(CombineValues<uint8_t>(DataType::kUInt8, RedOp::kAvg, {255, 255, 255})[0], 255);
  EXPECT_EQ(CombineValues<int32_t>(DataType::kInt32, RedOp::kAvg, {INT32_MAX, INT32_MAX, INT32_MAX})[0], INT32_MAX);
  // ...64-bit ones wrap there, as the contract says: (INT64_MAX + 1) wraps to INT64_MIN.
  EXPECT_EQ(CombineValues<int64_t>(DataType::kInt64, RedOp::kAvg, {INT64_MAX, 1})[0], INT64_MIN / 2);
  EXPECT_EQ(CombineValues<uint64_t>(DataType::kUInt64, RedOp::kAvg, {UINT64_MAX, 3})[0], 1u);
}

TEST(CombineSemantics, IntegerSumAndProdWrap) {
  EXPECT_EQ(CombineValues<int8_t>(DataType::kInt8, RedOp::kSum, {127, 1})[0], -128);
  EXPECT_EQ(CombineValues<uint8_t>(DataType::kUInt8, RedOp::kProd, {16, 16, 3})[0], 0);
  EXPECT_EQ(CombineValues<int32_t>(DataType::kInt32, RedOp::kProd, {65536, 65536})[0], 0);
  EXPECT_EQ(CombineValues<int64_t>(DataType::kInt64, RedOp::kSum, {INT64_MAX, 1})[0], INT64_MIN);
  EXPECT_EQ(CombineValues<int64_t>(DataType::kInt64, RedOp::kProd, {INT64_MIN, -1})[0], INT64_MIN);
}

TEST(CombineSemantics, SixteenBitFloatsRoundOnceButRingStepsRoundEachTime) {
  // float16 2048 + 1 + 1: float32 accumulation gives 2050 (representable); rounding after each
  // step gives 2049 -> 2048 (tie to even) twice.
  const uint16_t h2048 = 0x6800, h1 = 0x3c00, h2050 = 0x6801;
  EXPECT_EQ(CombineValues<uint16_t>(DataType::kFloat16, RedOp::kSum, {h2048, h1, h1})[0], h2050);
  uint16_t ring = h2048;
  ASSERT_TRUE(Accumulate(DataType::kFloat16, RedOp::kSum, &ring, &h1, 1).ok());
  ASSERT_TRUE(Accumulate(DataType::kFloat16, RedOp::kSum, &ring, &h1, 1).ok());
  EXPECT_EQ(ring, h2048);
  // bfloat16: 256 + 1 + 1 = 258 once, 256 step by step.
  const uint16_t b256 = 0x4380, b1 = 0x3f80, b258 = 0x4381;
  EXPECT_EQ(CombineValues<uint16_t>(DataType::kBFloat16, RedOp::kSum, {b256, b1, b1})[0], b258);
  // The intermediate 2 * 65504 overflows float16 but not the float32 accumulator.
  const uint16_t hmax = 0x7bff, hneg_max = 0xfbff;
  EXPECT_EQ(CombineValues<uint16_t>(DataType::kFloat16, RedOp::kSum, {hmax, hmax, hneg_max})[0], hmax);
  EXPECT_EQ(CombineValues<uint16_t>(DataType::kFloat16, RedOp::kSum, {hmax, hmax})[0], 0x7c00);
}

TEST(CombineSemantics, MinMaxArePlainComparisonsInSourceOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(CombineValues<float>(DataType::kFloat32, RedOp::kMin, {nan, 1.0f})[0], 1.0f);
  EXPECT_TRUE(std::isnan(CombineValues<float>(DataType::kFloat32, RedOp::kMin, {1.0f, nan})[0]));
  EXPECT_EQ(CombineValues<float>(DataType::kFloat32, RedOp::kMax, {nan, 1.0f})[0], 1.0f);
  EXPECT_TRUE(std::isnan(CombineValues<float>(DataType::kFloat32, RedOp::kMax, {1.0f, nan})[0]));
  // Equal operands keep the later one, which shows with signed zeros.
  EXPECT_TRUE(std::signbit(CombineValues<float>(DataType::kFloat32, RedOp::kMin, {0.0f, -0.0f})[0]));
  EXPECT_FALSE(std::signbit(CombineValues<float>(DataType::kFloat32, RedOp::kMin, {-0.0f, 0.0f})[0]));
  // Same rules for 16-bit floats (compared after widening).
  const uint16_t hnan = 0x7e00, h1 = 0x3c00;
  EXPECT_EQ(CombineValues<uint16_t>(DataType::kFloat16, RedOp::kMin, {hnan, h1})[0], h1);
  EXPECT_EQ(CombineValues<uint16_t>(DataType::kFloat16, RedOp::kMin, {h1, hnan})[0], hnan);
}

TEST(CombineSemantics, PermutedSourcesGiveTheSameIntegerResult) {
  std::mt19937_64 rng(4242);
  for (const RedOp op : kAllOps) {
    SCOPED_TRACE(RedOpName(op));
    Sources<int32_t> sources = RandomIntegers<int32_t>(8, 4099, rng);
    const std::vector<int32_t> original = CombineChecked(DataType::kInt32, op, sources);
    for (int trial = 0; trial < 4; ++trial) {
      std::shuffle(sources.begin(), sources.end(), rng);
      ASSERT_TRUE(CombineChecked(DataType::kInt32, op, sources) == original);
    }
  }
  Sources<uint8_t> bytes = RandomIntegers<uint8_t>(8, 4099, rng);
  const std::vector<uint8_t> original = CombineChecked(DataType::kUInt8, RedOp::kSum, bytes);
  std::reverse(bytes.begin(), bytes.end());
  EXPECT_TRUE(CombineChecked(DataType::kUInt8, RedOp::kSum, bytes) == original);
}

TEST(CombineSemantics, FoldsLeftToRightInSourceOrder) {
  // 1e8 + 1 rounds back to 1e8 in float32, so only the left fold ((1e8 + -1e8) + 1) gives 1.
  EXPECT_EQ(CombineValues<float>(DataType::kFloat32, RedOp::kSum, {1e8f, -1e8f, 1.0f})[0], 1.0f);
  EXPECT_EQ(CombineValues<float>(DataType::kFloat32, RedOp::kSum, {1e8f, 1.0f, -1e8f})[0], 0.0f);

  // Bitwise equal to an explicit left fold in the accumulator type, for data where the order
  // changes the rounding.
  std::mt19937_64 rng(31337);
  std::uniform_real_distribution<float> dist(-1e4f, 1e4f);
  Sources<float> floats(13, std::vector<float>(4099));
  Sources<uint16_t> halves(13, std::vector<uint16_t>(4099));
  for (int s = 0; s < 13; ++s) {
    for (size_t i = 0; i < 4099; ++i) {
      floats[s][i] = dist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
      halves[s][i] = RoundAndEncode(kBinary16, floats[s][i] / 256);
    }
  }
  const std::vector<float> got = CombineChecked(DataType::kFloat32, RedOp::kSum, floats);
  const std::vector<uint16_t> got_halves = CombineChecked(DataType::kFloat16, RedOp::kSum, halves);
  for (size_t i = 0; i < 4099; ++i) {
    float fold = floats[0][i];
    float half_fold = static_cast<float>(Decode(kBinary16, halves[0][i]));
    for (int s = 1; s < 13; ++s) {
      fold += floats[s][i];
      half_fold += static_cast<float>(Decode(kBinary16, halves[s][i]));
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(fold)) << "element " << i;
    ASSERT_EQ(got_halves[i], RoundAndEncode(kBinary16, half_fold)) << "element " << i;
  }
}

TEST(CombineSemantics, FixedOrderIsBitwiseReproducible) {
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  Sources<float> sources(8, std::vector<float>(4099));
  for (auto& s : sources) {
    for (auto& v : s) v = dist(rng);
  }
  const std::vector<float> first = CombineChecked(DataType::kFloat32, RedOp::kSum, sources);
  const std::vector<float> second = CombineChecked(DataType::kFloat32, RedOp::kSum, sources);
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
}

// ---- Bitwise ops: integer types only. ----

using IntegerTypeAndOp = std::tuple<DataType, RedOp>;
class BitwiseCombineTest : public ::testing::TestWithParam<IntegerTypeAndOp> {};

TEST_P(BitwiseCombineTest, MatchesIndependentReferenceBitForBit) {
  const auto [dtype, op] = GetParam();
  std::mt19937_64 rng(31 + static_cast<uint64_t>(dtype) * 100 + static_cast<uint64_t>(op));
  for (const int nsrc : kSourceCounts) {
    for (const size_t count : kCounts) {
      SCOPED_TRACE("nsrc=" + std::to_string(nsrc) + " count=" + std::to_string(count));
      switch (dtype) {
        case DataType::kInt8: CheckBitwiseCombine<int8_t>(dtype, op, nsrc, count, rng); break;
        case DataType::kUInt8: CheckBitwiseCombine<uint8_t>(dtype, op, nsrc, count, rng); break;
        case DataType::kInt32: CheckBitwiseCombine<int32_t>(dtype, op, nsrc, count, rng); break;
        case DataType::kUInt32: CheckBitwiseCombine<uint32_t>(dtype, op, nsrc, count, rng); break;
        case DataType::kInt64: CheckBitwiseCombine<int64_t>(dtype, op, nsrc, count, rng); break;
        case DataType::kUInt64: CheckBitwiseCombine<uint64_t>(dtype, op, nsrc, count, rng); break;
        default: FAIL() << "not an integer type";
      }
      if (HasFailure()) return;
    }
  }
}

TEST_P(BitwiseCombineTest, AccumulateIsOneStep) {
  const auto [dtype, op] = GetParam();
  std::mt19937_64 rng(37 + static_cast<uint64_t>(dtype) * 100 + static_cast<uint64_t>(op));
  for (const size_t count : kCounts) {
    SCOPED_TRACE("count=" + std::to_string(count));
    switch (dtype) {
      case DataType::kInt8: CheckIntegerAccumulate<int8_t>(dtype, op, count, rng); break;
      case DataType::kUInt8: CheckIntegerAccumulate<uint8_t>(dtype, op, count, rng); break;
      case DataType::kInt32: CheckIntegerAccumulate<int32_t>(dtype, op, count, rng); break;
      case DataType::kUInt32: CheckIntegerAccumulate<uint32_t>(dtype, op, count, rng); break;
      case DataType::kInt64: CheckIntegerAccumulate<int64_t>(dtype, op, count, rng); break;
      case DataType::kUInt64: CheckIntegerAccumulate<uint64_t>(dtype, op, count, rng); break;
      default: FAIL() << "not an integer type";
    }
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(IntegerTypes, BitwiseCombineTest,
                         ::testing::Combine(::testing::ValuesIn(kIntegerTypes), ::testing::ValuesIn(kBitwiseOps)),
                         [](const ::testing::TestParamInfo<IntegerTypeAndOp>& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
                                  RedOpName(std::get<1>(info.param));
                         });

// A few values worked by hand, so the reference above is not the only witness.
TEST(BitwiseCombine, KnownValues) {
  const uint8_t a[3] = {0xf0, 0xff, 0x0f}, b[3] = {0x3c, 0x00, 0x0f}, c[3] = {0x0f, 0x81, 0xf0};
  const void* srcs[3] = {a, b, c};
  uint8_t out[3];
  ASSERT_TRUE(Combine(DataType::kUInt8, RedOp::kBand, srcs, 3, out, 3).ok());
  EXPECT_EQ(out[0], 0x00);
  EXPECT_EQ(out[1], 0x00);
  EXPECT_EQ(out[2], 0x00);
  ASSERT_TRUE(Combine(DataType::kUInt8, RedOp::kBor, srcs, 3, out, 3).ok());
  EXPECT_EQ(out[0], 0xff);
  EXPECT_EQ(out[1], 0xff);
  EXPECT_EQ(out[2], 0xff);
  ASSERT_TRUE(Combine(DataType::kUInt8, RedOp::kBxor, srcs, 3, out, 3).ok());
  EXPECT_EQ(out[0], 0xf0 ^ 0x3c ^ 0x0f);
  EXPECT_EQ(out[1], 0x7e);
  EXPECT_EQ(out[2], 0xf0);
  const int64_t x[2] = {-1, INT64_MIN}, y[2] = {INT64_MIN, 5};
  const void* s64[2] = {x, y};
  int64_t o64[2];
  ASSERT_TRUE(Combine(DataType::kInt64, RedOp::kBand, s64, 2, o64, 2).ok());
  EXPECT_EQ(o64[0], INT64_MIN);
  EXPECT_EQ(o64[1], 0);
  ASSERT_TRUE(Combine(DataType::kInt64, RedOp::kBxor, s64, 2, o64, 2).ok());
  EXPECT_EQ(o64[0], INT64_MAX);
  EXPECT_EQ(o64[1], INT64_MIN + 5);
}

TEST(BitwiseCombine, RefusedForFloatingPointTypes) {
  const double a[1] = {1}, b[1] = {2};
  const void* srcs[2] = {a, b};
  double out[1] = {7};
  for (const DataType dt : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64}) {
    for (const RedOp op : kBitwiseOps) {
      const Status st = Combine(dt, op, srcs, 2, out, 1);
      EXPECT_EQ(st.code(), Code::kInvalidArgument) << DataTypeName(dt) << " " << RedOpName(op);
      EXPECT_NE(st.message().find(DataTypeName(dt)), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("integer"), std::string::npos) << st.message();
      EXPECT_EQ(Accumulate(dt, op, out, a, 1).code(), Code::kInvalidArgument);
    }
  }
  EXPECT_EQ(out[0], 7);  // untouched
}

// ---- Argument checking. ----

TEST(CombineArguments, RejectsBadTypeOpAndSourceCount) {
  const float a[1] = {1}, b[1] = {2};
  const void* srcs[2] = {a, b};
  float out[1];
  const auto combine = [&](DataType dt, RedOp op, int nsrc) { return Combine(dt, op, srcs, nsrc, out, 1).code(); };
  EXPECT_EQ(combine(static_cast<DataType>(kNumDataTypes), RedOp::kSum, 2), Code::kInvalidArgument);
  EXPECT_EQ(combine(static_cast<DataType>(255), RedOp::kSum, 2), Code::kInvalidArgument);
  EXPECT_EQ(combine(DataType::kFloat32, static_cast<RedOp>(kNumRedOps), 2), Code::kInvalidArgument);
  EXPECT_EQ(combine(DataType::kFloat32, RedOp::kSum, 0), Code::kInvalidArgument);
  EXPECT_EQ(combine(DataType::kFloat32, RedOp::kSum, -1), Code::kInvalidArgument);
  EXPECT_EQ(combine(DataType::kFloat32, RedOp::kSum, 2), Code::kOk);
  EXPECT_EQ(out[0], 3.0f);
}

TEST(CombineArguments, RejectsNullBuffersUnlessCountIsZero) {
  const float a[1] = {1};
  const void* with_null[2] = {a, nullptr};
  float out[1];
  EXPECT_EQ(Combine(DataType::kFloat32, RedOp::kSum, with_null, 2, out, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(Combine(DataType::kFloat32, RedOp::kSum, nullptr, 2, out, 1).code(), Code::kInvalidArgument);
  const void* srcs[1] = {a};
  EXPECT_EQ(Combine(DataType::kFloat32, RedOp::kSum, srcs, 1, nullptr, 1).code(), Code::kInvalidArgument);
  EXPECT_TRUE(Combine(DataType::kFloat32, RedOp::kSum, nullptr, 2, nullptr, 0).ok());
}

TEST(CombineArguments, AccumulateAndFinishAverageCheckArguments) {
  float dst[1] = {1}, src[1] = {2};
  EXPECT_EQ(Accumulate(static_cast<DataType>(kNumDataTypes), RedOp::kSum, dst, src, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(Accumulate(DataType::kFloat32, static_cast<RedOp>(kNumRedOps), dst, src, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(Accumulate(DataType::kFloat32, RedOp::kSum, dst, nullptr, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(FinishAverage(DataType::kFloat32, dst, 1, 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(FinishAverage(DataType::kFloat32, dst, 1, -2).code(), Code::kInvalidArgument);
  EXPECT_EQ(FinishAverage(static_cast<DataType>(kNumDataTypes), dst, 1, 2).code(), Code::kInvalidArgument);
  EXPECT_TRUE(Accumulate(DataType::kFloat32, RedOp::kAvg, dst, src, 1).ok());
  EXPECT_EQ(dst[0], 3.0f);  // avg accumulates as a sum
  EXPECT_TRUE(FinishAverage(DataType::kFloat32, dst, 1, 2).ok());
  EXPECT_EQ(dst[0], 1.5f);
}

}  // namespace
}  // namespace optcast::reduce
