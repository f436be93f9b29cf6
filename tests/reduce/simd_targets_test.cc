// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// Runs Combine on every instruction set Highway compiled for and this CPU has (SSE4, AVX2,
// AVX-512, the scalar fallback), against a sequential scalar reference of the contract: sources
// folded in order in the accumulator type (float32 for 16-bit floats), rounded once. Inputs are
// arbitrary bit patterns, so subnormals, infinities and NaNs go through every kernel.

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "reduce/combine.h"
#include "reduce/simd_kernels.h"
#include "reference.h"

namespace optcast::reduce {
namespace {

using reference::Format;

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
                                  DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,    DataType::kUInt32,
                                  DataType::kInt64,   DataType::kUInt64};
constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax,
                             RedOp::kAvg, RedOp::kBand, RedOp::kBor, RedOp::kBxor};
// 1-4 sources: one pass straight into dst; 5, 8, 9, 13: accumulator passes, partial last pass.
constexpr int kSourceCounts[] = {1, 2, 3, 4, 5, 8, 9, 13};
// Lane tails, two-vector steps, a whole 2048-element block plus a tail.
constexpr size_t kCounts[] = {1, 3, 17, 100, 2048 + 37};

// Restores normal target selection however a test ends.
class TargetScope {
 public:
  explicit TargetScope(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
  ~TargetScope() { hwy::SetSupportedTargetsForTest(0); }
};

template <typename A>
A ApplyOp(RedOp op, A acc, A v) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return static_cast<A>(acc + v);
    case RedOp::kProd: {
      using Wide = std::conditional_t<std::is_integral_v<A> && sizeof(A) < sizeof(unsigned), unsigned, A>;
      return static_cast<A>(static_cast<Wide>(acc) * static_cast<Wide>(v));
    }
    case RedOp::kMin: return reference::PlainMin(acc, v);
    case RedOp::kMax: return reference::PlainMax(acc, v);
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor:
      if constexpr (std::is_integral_v<A>) {
        return static_cast<A>(op == RedOp::kBand ? (acc & v) : op == RedOp::kBor ? (acc | v) : (acc ^ v));
      }
      break;
  }
  return acc;
}

// ---- 16-bit floats: decode with the reference, fold in float, round once. ----

float DecodeToFloat(const Format& f, uint16_t bits) {
  if (reference::IsNaNBits(f, bits)) return std::nanf("");
  return static_cast<float>(reference::Decode(f, bits));  // exact: float32 holds both formats
}

uint16_t HalfReference(const Format& f, RedOp op, const std::vector<std::vector<uint16_t>>& s, size_t i, bool* nan) {
  float acc = DecodeToFloat(f, s[0][i]);
  for (size_t k = 1; k < s.size(); ++k) acc = ApplyOp(op, acc, DecodeToFloat(f, s[k][i]));
  if (op == RedOp::kAvg) acc /= static_cast<float>(s.size());
  *nan = std::isnan(acc);
  return *nan ? 0 : reference::RoundAndEncode(f, acc);
}

void CheckHalf(const Format& f, DataType dtype, RedOp op, int nsrc, size_t count, std::mt19937_64& rng) {
  std::vector<std::vector<uint16_t>> s(nsrc, std::vector<uint16_t>(count));
  std::uniform_int_distribution<int> near_one(-60, 60);
  for (auto& src : s) {
    for (auto& v : src) {
      const uint64_t r = rng();
      // Three in four: a value within a few binades of 1; otherwise any bit pattern at all.
      v = (r & 3) != 0 ? reference::RoundAndEncode(f, std::ldexp(static_cast<double>(static_cast<int>(r >> 8) % 2048),
                                                                 near_one(rng) / 10 - 10))
                       : static_cast<uint16_t>(r >> 16);
    }
  }
  std::vector<const void*> ptrs;
  for (const auto& src : s) ptrs.push_back(src.data());
  std::vector<uint16_t> got(count);
  ASSERT_TRUE(Combine(dtype, op, ptrs.data(), nsrc, got.data(), count).ok());
  for (size_t i = 0; i < count; ++i) {
    bool nan = false;
    const uint16_t want = HalfReference(f, op, s, i, &nan);
    if (nan) {
      ASSERT_TRUE(reference::IsNaNBits(f, got[i])) << "element " << i << std::hex << " got 0x" << got[i];
    } else {
      ASSERT_EQ(got[i], want) << "element " << i << std::hex << " got 0x" << got[i] << " want 0x" << want;
    }
  }
}

// ---- float32/float64 and integers: fold in the type itself. ----

template <typename T>
T RandomValue(std::mt19937_64& rng) {
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const uint64_t r = rng();
    if ((r & 7) == 0) return std::bit_cast<T>(static_cast<Bits>(rng()));  // any pattern, NaN included
    std::uniform_real_distribution<T> near_one(0.5, 2.0);
    return (r & 8) ? near_one(rng) : -near_one(rng);
  } else {
    return static_cast<T>(rng());
  }
}

template <typename T>
T PlainReference(RedOp op, const std::vector<std::vector<T>>& s, size_t i) {
  const int n = static_cast<int>(s.size());
  if constexpr (std::is_integral_v<T>) {
    if (op == RedOp::kAvg) {  // 64-bit sum, quotient truncated toward zero
      if constexpr (std::is_signed_v<T>) {
        uint64_t sum = 0;  // wraps like the kernel's 64-bit sum
        for (const auto& src : s) sum += static_cast<uint64_t>(static_cast<int64_t>(src[i]));
        return static_cast<T>(static_cast<int64_t>(sum) / n);
      } else {
        uint64_t sum = 0;
        for (const auto& src : s) sum += src[i];
        return static_cast<T>(sum / static_cast<uint64_t>(n));
      }
    }
    using U = std::make_unsigned_t<T>;  // sum/prod wrap
    if (op == RedOp::kSum || op == RedOp::kProd) {
      U acc = static_cast<U>(s[0][i]);
      for (int k = 1; k < n; ++k) acc = ApplyOp<U>(op, acc, static_cast<U>(s[k][i]));
      return static_cast<T>(acc);
    }
  }
  T acc = s[0][i];
  for (int k = 1; k < n; ++k) acc = ApplyOp<T>(op, acc, s[k][i]);
  if constexpr (std::is_floating_point_v<T>) {
    if (op == RedOp::kAvg) acc /= static_cast<T>(n);
  }
  return acc;
}

template <typename T>
void CheckPlain(DataType dtype, RedOp op, int nsrc, size_t count, std::mt19937_64& rng) {
  std::vector<std::vector<T>> s(nsrc, std::vector<T>(count));
  for (auto& src : s) {
    for (auto& v : src) v = RandomValue<T>(rng);
  }
  std::vector<const void*> ptrs;
  for (const auto& src : s) ptrs.push_back(src.data());
  std::vector<T> got(count);
  ASSERT_TRUE(Combine(dtype, op, ptrs.data(), nsrc, got.data(), count).ok());
  for (size_t i = 0; i < count; ++i) {
    const T want = PlainReference(op, s, i);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[i])) << "element " << i << " got " << got[i];
        continue;
      }
    }
    ASSERT_EQ(std::memcmp(&got[i], &want, sizeof(T)), 0) << "element " << i << ": got " << +got[i] << " want " << +want;
  }
}

void Check(DataType dtype, RedOp op, int nsrc, size_t count, std::mt19937_64& rng) {
  switch (dtype) {
    case DataType::kFloat32: return CheckPlain<float>(dtype, op, nsrc, count, rng);
    case DataType::kFloat64: return CheckPlain<double>(dtype, op, nsrc, count, rng);
    case DataType::kFloat16: return CheckHalf(reference::kBinary16, dtype, op, nsrc, count, rng);
    case DataType::kBFloat16: return CheckHalf(reference::kBFloat16, dtype, op, nsrc, count, rng);
    case DataType::kInt8: return CheckPlain<int8_t>(dtype, op, nsrc, count, rng);
    case DataType::kUInt8: return CheckPlain<uint8_t>(dtype, op, nsrc, count, rng);
    case DataType::kInt32: return CheckPlain<int32_t>(dtype, op, nsrc, count, rng);
    case DataType::kUInt32: return CheckPlain<uint32_t>(dtype, op, nsrc, count, rng);
    case DataType::kInt64: return CheckPlain<int64_t>(dtype, op, nsrc, count, rng);
    case DataType::kUInt64: return CheckPlain<uint64_t>(dtype, op, nsrc, count, rng);
  }
}

// Every target the kernels were compiled for that this CPU can run.
std::vector<int64_t> Targets() {
  std::vector<int64_t> out;
  for (const int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if ((t & detail::CompiledSimdTargets()) != 0) out.push_back(t);
  }
  return out;
}

class SimdTargetTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(SimdTargetTest, EveryTypeAndOpMatchesSequentialReference) {
  TargetScope scope(GetParam());
  ASSERT_STREQ(detail::SimdTargetName(), hwy::TargetName(GetParam()));
  std::mt19937_64 rng(static_cast<uint64_t>(GetParam()));
  for (const DataType dtype : kAllTypes) {
    for (const RedOp op : kAllOps) {
      if (!IsRedOpDefinedFor(op, dtype)) continue;  // bitwise ops on floats: refused, tested elsewhere
      for (const int nsrc : kSourceCounts) {
        for (const size_t count : kCounts) {
          SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " + RedOpName(op) + " nsrc=" + std::to_string(nsrc) +
                       " count=" + std::to_string(count));
          Check(dtype, op, nsrc, count, rng);
          if (HasFailure()) return;
        }
      }
    }
  }
}

// Every type/op pair that is defined has a vector kernel (Combine's avg divides by nsrc).
TEST_P(SimdTargetTest, VectorKernelsCoverEveryPair) {
  TargetScope scope(GetParam());
  std::vector<uint8_t> a(64, 1), b(64, 2), out(64);
  const void* srcs[2] = {a.data(), b.data()};
  for (const DataType dtype : kAllTypes) {
    for (const RedOp op : kAllOps) {
      if (!IsRedOpDefinedFor(op, dtype)) continue;
      const size_t count = out.size() / DataTypeSize(dtype);
      EXPECT_TRUE(detail::RunSimdKernel(dtype, op, srcs, 2, out.data(), count, 2))
          << DataTypeName(dtype) << " " << RedOpName(op);
    }
  }
}

// Integer avg where a float64 path could go wrong: sums at the ends of the range, negative
// quotients that must truncate toward zero, and unsigned values above INT32_MAX.
template <typename T>
void CheckAverageEdges(DataType dtype) {
  using L = std::numeric_limits<T>;
  const T edge[] = {L::min(), L::max(), static_cast<T>(L::min() + 1), static_cast<T>(L::max() - 1),
                    T{0},     T{1},     static_cast<T>(-1),           static_cast<T>(L::max() / 2 + 1)};
  for (const int nsrc : {2, 3, 5, 8, 13}) {
    // Every source a different rotation of the edge values, so each element mixes them.
    const size_t count = 64;
    std::vector<std::vector<T>> s(nsrc, std::vector<T>(count));
    for (int k = 0; k < nsrc; ++k) {
      for (size_t i = 0; i < count; ++i) s[k][i] = edge[(i * (k + 1) + i / 8) % std::size(edge)];
    }
    std::vector<const void*> ptrs;
    for (const auto& src : s) ptrs.push_back(src.data());
    std::vector<T> got(count);
    ASSERT_TRUE(Combine(dtype, RedOp::kAvg, ptrs.data(), nsrc, got.data(), count).ok());
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(got[i], PlainReference(RedOp::kAvg, s, i)) << DataTypeName(dtype) << " nsrc=" << nsrc << " i=" << i;
    }
  }
}

// FinishAverage divides one buffer by a divisor of its own: 64-bit lanes with small and large
// divisors (above 2^20 the portable loop takes over), against plain integer division.
TEST_P(SimdTargetTest, SixtyFourBitFinishAverageMatchesIntegerDivision) {
  TargetScope scope(GetParam());
  std::mt19937_64 rng(11);
  for (const int divisor : {1, 3, 7, 8192, 999983, (1 << 20) + 1}) {
    std::vector<int64_t> values(100);
    for (auto& v : values) v = static_cast<int64_t>(rng());
    values[0] = std::numeric_limits<int64_t>::min();
    values[1] = std::numeric_limits<int64_t>::max();
    values[2] = -1;
    std::vector<uint64_t> unsigned_values(values.begin(), values.end());
    std::vector<int64_t> got = values;
    std::vector<uint64_t> got_unsigned = unsigned_values;
    ASSERT_TRUE(FinishAverage(DataType::kInt64, got.data(), got.size(), divisor).ok());
    ASSERT_TRUE(FinishAverage(DataType::kUInt64, got_unsigned.data(), got_unsigned.size(), divisor).ok());
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(got[i], values[i] / divisor) << "int64 " << values[i] << " / " << divisor;
      ASSERT_EQ(got_unsigned[i], unsigned_values[i] / static_cast<uint64_t>(divisor))
          << "uint64 " << unsigned_values[i] << " / " << divisor;
    }
  }
}

TEST_P(SimdTargetTest, IntegerAverageAtTheEdgesOfTheRange) {
  TargetScope scope(GetParam());
  CheckAverageEdges<int8_t>(DataType::kInt8);
  CheckAverageEdges<uint8_t>(DataType::kUInt8);
  CheckAverageEdges<int32_t>(DataType::kInt32);
  CheckAverageEdges<uint32_t>(DataType::kUInt32);
  CheckAverageEdges<int64_t>(DataType::kInt64);
  CheckAverageEdges<uint64_t>(DataType::kUInt64);
}

// Every float16/bfloat16 pattern through one widen + round: finite values come back unchanged,
// NaNs come back as NaNs with the quiet bit set and the sign kept.
TEST_P(SimdTargetTest, SixteenBitRoundTripOfEveryPattern) {
  TargetScope scope(GetParam());
  for (const auto& [dtype, format] :
       {std::pair{DataType::kFloat16, reference::kBinary16}, std::pair{DataType::kBFloat16, reference::kBFloat16}}) {
    std::vector<uint16_t> all(65536), out(65536);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
    const void* src = all.data();
    ASSERT_TRUE(Combine(dtype, RedOp::kMax, &src, 1, out.data(), all.size()).ok());
    for (size_t i = 0; i < all.size(); ++i) {
      if (reference::IsNaNBits(format, all[i])) {
        ASSERT_EQ(out[i], all[i] | reference::QuietBit(format)) << DataTypeName(dtype) << " pattern " << i;
      } else {
        ASSERT_EQ(out[i], all[i]) << DataTypeName(dtype) << " pattern " << i;
      }
    }
  }
}

// In place (dst == srcs[0]) with an accumulator pass gives the out-of-place bits.
TEST_P(SimdTargetTest, InPlaceMatchesOutOfPlace) {
  TargetScope scope(GetParam());
  std::mt19937_64 rng(7);
  const size_t count = 5000;
  std::vector<std::vector<float>> s(9, std::vector<float>(count));
  for (auto& src : s) {
    for (auto& v : src) v = RandomValue<float>(rng);
  }
  std::vector<const void*> ptrs;
  for (const auto& src : s) ptrs.push_back(src.data());
  std::vector<float> out(count);
  ASSERT_TRUE(Combine(DataType::kFloat32, RedOp::kSum, ptrs.data(), 9, out.data(), count).ok());
  std::vector<float> in_place = s[0];
  ptrs[0] = in_place.data();
  ASSERT_TRUE(Combine(DataType::kFloat32, RedOp::kSum, ptrs.data(), 9, in_place.data(), count).ok());
  ASSERT_EQ(std::memcmp(in_place.data(), out.data(), count * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Targets, SimdTargetTest, ::testing::ValuesIn(Targets()),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::string(hwy::TargetName(info.param));
                         });

}  // namespace
}  // namespace optcast::reduce
