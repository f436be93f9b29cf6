// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// Highway compiles this file once per instruction set (foreach_target.h re-includes it) and
// HWY_DYNAMIC_DISPATCH picks the best one the CPU has. Every kernel produces exactly the bits of
// the portable kernel in combine.cc: sources are combined in order, 16-bit floats widen to
// float32 and round once with round-to-nearest-even, and min/max are the plain comparisons
// `a < b ? a : b` (not IEEE minNum), so NaNs land where the portable loop puts them.

#include "reduce/simd_kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

// SSSE3 would only add compile time: every x86-64 CPU that has it but not SSE4 is long retired.
// The value is HWY_SSSE3, which is not defined before Highway's headers are included.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (1LL << 12)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "reduce/simd_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "reduce/float16_codecs-inl.h"

HWY_BEFORE_NAMESPACE();
namespace optcast::reduce::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements per block. A block is finished (every source folded, result stored) before the next
// starts, so the float32 accumulator of a block with more than kSourcesPerPass sources stays in
// L1 and dst may alias srcs[0].
constexpr size_t kBlockElems = 2048;
// Sources read per pass: a few streams for the prefetchers, no accumulator traffic for n <= 4.
constexpr int kSourcesPerPass = 4;

// ---- Codecs: how a stored element type loads into its accumulator lanes and stores back. ----
// (HalfCodec and BFloat16Codec: float16_codecs-inl.h, shared with the wire conversions.)

template <typename T>
struct PlainCodec {
  using Storage = T;
  using Acc = T;
  template <class D>
  static hn::Vec<D> Load(D d, const Storage* p) {
    return hn::LoadU(d, p);
  }
  template <class D>
  static void Store(D d, hn::Vec<D> v, Storage* p) {
    hn::StoreU(v, d, p);
  }
};

// 8-bit lanes have no multiply: products are formed in 16-bit lanes and the low byte kept, which
// is the wrapped product for int8 and uint8 alike (two's complement).
struct ByteProductCodec {
  using Storage = uint8_t;
  using Acc = uint16_t;
  template <class D>
  static hn::Vec<D> Load(D d, const Storage* p) {
    const hn::Rebind<uint8_t, D> d8;
    return hn::PromoteTo(d, hn::LoadU(d8, p));
  }
  template <class D>
  static void Store(D d, hn::Vec<D> v, Storage* p) {
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint8_t, D> d8;
    // Values < 256 after the mask: the saturating pack is exact.
    hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di, hn::And(v, hn::Set(d, 0xff)))), d8, p);
  }
};

// Integer avg of 8- and 32-bit elements: each value widens exactly to a float64 lane, the sum of
// up to 2^21 sources stays exact there (|sum| < 2^53), so it equals the portable kernel's 64-bit
// sum, and a float64 quotient of such a sum truncates to the exact integer quotient (the
// rounding error of one division is below 1/divisor there). Only used when the quotient is in
// the element's range (nsrc <= divisor), where the saturating narrowing below is exact.
template <typename T>
struct IntAverageCodec {
  using Storage = T;
  using Acc = double;
  static_assert(sizeof(T) == 1 || sizeof(T) == 4);
  // Unsigned 32-bit values do not fit int32 lanes: they travel offset by -2^31.
  static constexpr bool kOffset = sizeof(T) == 4 && !std::is_signed_v<T>;

  template <class D>
  static hn::Vec<D> Load(D d, const Storage* p) {
    const hn::Rebind<int32_t, D> di32;
    if constexpr (sizeof(T) == 1) {
      const hn::Rebind<T, D> d8;
      return hn::PromoteTo(d, hn::PromoteTo(di32, hn::LoadU(d8, p)));
    } else if constexpr (kOffset) {
      const hn::Rebind<uint32_t, D> du32;
      const auto shifted = hn::BitCast(di32, hn::Xor(hn::LoadU(du32, p), hn::Set(du32, 0x80000000u)));
      return hn::Add(hn::PromoteTo(d, shifted), hn::Set(d, 2147483648.0));
    } else {
      return hn::PromoteTo(d, hn::LoadU(di32, p));
    }
  }
  template <class D>
  static void Store(D d, hn::Vec<D> v, Storage* p) {
    const hn::Rebind<int32_t, D> di32;
    // Truncation toward zero is the integer division's rounding. It comes first: an integral
    // value in range narrows exactly on every target (some saturate a fraction past the range,
    // such as -2147483647.5, before truncating it).
    v = hn::Trunc(v);
    if constexpr (sizeof(T) == 1) {
      const hn::Rebind<T, D> d8;
      hn::StoreU(hn::DemoteTo(d8, hn::DemoteTo(di32, v)), d8, p);
    } else if constexpr (kOffset) {
      // The quotient is an integer >= 0, so the offset value is exact.
      const hn::Rebind<uint32_t, D> du32;
      const auto shifted = hn::DemoteTo(di32, hn::Sub(v, hn::Set(d, 2147483648.0)));
      hn::StoreU(hn::Xor(hn::BitCast(du32, shifted), hn::Set(du32, 0x80000000u)), du32, p);
    } else {
      hn::StoreU(hn::DemoteTo(di32, v), di32, p);
    }
  }
};

// ---- Operators: op(accumulated, next), in source order. ----

struct SumOp {
  template <class V>
  static V Apply(V acc, V v) {
    return hn::Add(acc, v);  // integer lanes wrap
  }
};
// 64-bit lanes have no multiply before AVX-512DQ: the wrapped product is put together from
// 32x32->64 products of the halves, lo*lo + ((lo*hi + hi*lo) << 32), which is the same bits
// for signed and unsigned lanes.
template <class V>
V MulWrapped64(V a, V b) {
  using T = hn::TFromV<V>;
  static_assert(sizeof(T) == 8);
  const hn::DFromV<V> d;
#if HWY_TARGET == HWY_SCALAR
  // One lane, no halves to reinterpret: the scalar product is the same wrapped bits.
  using U = hwy::MakeUnsigned<T>;
  return hn::Set(d, static_cast<T>(static_cast<U>(hn::GetLane(a)) * static_cast<U>(hn::GetLane(b))));
#else
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::Repartition<uint32_t, decltype(d)> d32;
  const auto ua = hn::BitCast(du, a);
  const auto ub = hn::BitCast(du, b);
  const auto low = hn::MulEven(hn::BitCast(d32, ua), hn::BitCast(d32, ub));
  const auto cross = hn::Add(hn::MulEven(hn::BitCast(d32, ua), hn::BitCast(d32, hn::ShiftRight<32>(ub))),
                             hn::MulEven(hn::BitCast(d32, hn::ShiftRight<32>(ua)), hn::BitCast(d32, ub)));
  return hn::BitCast(d, hn::Add(low, hn::ShiftLeft<32>(cross)));
#endif
}

struct ProdOp {
  template <class V>
  static V Apply(V acc, V v) {
    if constexpr (!hwy::IsFloat<hn::TFromV<V>>() && sizeof(hn::TFromV<V>) == 8) {
      return MulWrapped64(acc, v);
    } else {
      return hn::Mul(acc, v);
    }
  }
};
// Float min/max are spelled as compare + select: the portable kernel's `acc < v ? acc : v`,
// whatever a target's Min does with NaN. Integers have no NaN, so Min/Max are the same thing.
struct MinOp {
  template <class V>
  static V Apply(V acc, V v) {
    if constexpr (hwy::IsFloat<hn::TFromV<V>>()) {
      return hn::IfThenElse(hn::Lt(acc, v), acc, v);
    } else {
      return hn::Min(acc, v);
    }
  }
};
struct MaxOp {
  template <class V>
  static V Apply(V acc, V v) {
    if constexpr (hwy::IsFloat<hn::TFromV<V>>()) {
      return hn::IfThenElse(hn::Gt(acc, v), acc, v);
    } else {
      return hn::Max(acc, v);
    }
  }
};

// Bitwise ops, integer lanes only (the float kernels never instantiate them).
struct BandOp {
  template <class V>
  static V Apply(V acc, V v) {
    return hn::And(acc, v);
  }
};
struct BorOp {
  template <class V>
  static V Apply(V acc, V v) {
    return hn::Or(acc, v);
  }
};
struct BxorOp {
  template <class V>
  static V Apply(V acc, V v) {
    return hn::Xor(acc, v);
  }
};

// ---- avg: the accumulated sum divided once, in the accumulator's lanes. ----

// No vector unit divides 64-bit integers, but the divisor is small: with |sum| = hi * 2^32 + lo,
// q_hi = floor(hi / d) and r = hi - q_hi * d < d, the rest r * 2^32 + lo stays below d * 2^32
// <= 2^52, so both quotients are exact in float64 and floor(|sum| / d) = q_hi * 2^32 +
// floor(rest / d). Signed sums divide their magnitude (2^63 fits in the unsigned lane) and
// take the sign back, which truncates toward zero like the integer division.
constexpr int64_t kMaxWideDivisor = int64_t{1} << 20;

template <class DU>
hn::Vec<DU> DivideMagnitude(DU du, hn::Vec<DU> magnitude, double divisor) {
  const hn::RebindToSigned<DU> di;
  const hn::Rebind<double, DU> df;
  const auto d = hn::Set(df, divisor);
  const auto hi = hn::ConvertTo(df, hn::BitCast(di, hn::ShiftRight<32>(magnitude)));
  const auto lo = hn::ConvertTo(df, hn::BitCast(di, hn::And(magnitude, hn::Set(du, 0xffffffffu))));
  const auto q_hi = hn::Floor(hn::Div(hi, d));
  const auto rest = hn::Add(hn::Mul(hn::Sub(hi, hn::Mul(q_hi, d)), hn::Set(df, 4294967296.0)), lo);
  const auto q_lo = hn::Floor(hn::Div(rest, d));
  return hn::Add(hn::ShiftLeft<32>(hn::BitCast(du, hn::ConvertTo(di, q_hi))), hn::BitCast(du, hn::ConvertTo(di, q_lo)));
}

template <class D>
HWY_INLINE hn::Vec<D> Average(D d, hn::Vec<D> sum, hn::TFromD<D> divisor) {
  using T = hn::TFromD<D>;
  if constexpr (hwy::IsFloat<T>()) {
    return hn::Div(sum, hn::Set(d, divisor));
  } else {
    static_assert(sizeof(T) == 8);
    const hn::RebindToUnsigned<D> du;
    if constexpr (std::is_signed_v<T>) {
      const auto negative = hn::Lt(sum, hn::Zero(d));
      const auto magnitude = hn::BitCast(du, hn::IfThenElse(negative, hn::Neg(sum), sum));
      const auto q = hn::BitCast(d, DivideMagnitude(du, magnitude, static_cast<double>(divisor)));
      return hn::IfThenElse(negative, hn::Neg(q), q);
    } else {
      return DivideMagnitude(du, sum, static_cast<double>(divisor));
    }
  }
}

// ---- The kernel: blocks of passes over up to kSourcesPerPass sources. ----

template <class Codec, class Op, bool kAverage>
struct Kernel {
  using S = typename Codec::Storage;
  using A = typename Codec::Acc;

  // One vector (or one lane, for tails) at element i of the block. The first pass starts from
  // source 0, later ones from the accumulator; the last pass stores into dst, others into acc.
  template <bool kFirst, bool kLast, int kSources, class D>
  static HWY_INLINE void Step(D d, A* HWY_RESTRICT acc, const S* const* s, S* dst, A divisor, size_t i) {
    auto v = Codec::Load(d, s[0] + i);
    if constexpr (!kFirst) v = Op::Apply(hn::LoadU(d, acc + i), v);
    if constexpr (kSources > 1) v = Op::Apply(v, Codec::Load(d, s[1] + i));
    if constexpr (kSources > 2) v = Op::Apply(v, Codec::Load(d, s[2] + i));
    if constexpr (kSources > 3) v = Op::Apply(v, Codec::Load(d, s[3] + i));
    if constexpr (kLast) {
      if constexpr (kAverage) v = Average(d, v, divisor);
      Codec::Store(d, v, dst + i);
    } else {
      hn::StoreU(v, d, acc + i);
    }
  }

  template <bool kFirst, bool kLast, int kSources>
  static void Fold(A* HWY_RESTRICT acc, const S* const* s, S* dst, A divisor, size_t len) {
    const hn::ScalableTag<A> d;
    const size_t lanes = hn::Lanes(d);
    size_t i = 0;
    for (; i + 2 * lanes <= len; i += 2 * lanes) {
      Step<kFirst, kLast, kSources>(d, acc, s, dst, divisor, i);
      Step<kFirst, kLast, kSources>(d, acc, s, dst, divisor, i + lanes);
    }
    for (; i + lanes <= len; i += lanes) Step<kFirst, kLast, kSources>(d, acc, s, dst, divisor, i);
    const hn::CappedTag<A, 1> d1;
    for (; i < len; ++i) Step<kFirst, kLast, kSources>(d1, acc, s, dst, divisor, i);
  }

  template <bool kFirst, bool kLast>
  static void Pass(A* acc, const void* const* srcs, int sources, size_t offset, S* dst, A divisor, size_t len) {
    const S* s[kSourcesPerPass];
    for (int k = 0; k < sources; ++k) s[k] = static_cast<const S*>(srcs[k]) + offset;
    switch (sources) {
      case 1: return Fold<kFirst, kLast, 1>(acc, s, dst + offset, divisor, len);
      case 2: return Fold<kFirst, kLast, 2>(acc, s, dst + offset, divisor, len);
      case 3: return Fold<kFirst, kLast, 3>(acc, s, dst + offset, divisor, len);
      default: return Fold<kFirst, kLast, 4>(acc, s, dst + offset, divisor, len);
    }
  }

  static void Run(const void* const* srcs, int nsrc, void* untyped_dst, size_t count, int divisor) {
    static_assert(kSourcesPerPass == 4);
    S* dst = static_cast<S*>(untyped_dst);
    const A typed_divisor = static_cast<A>(divisor);
    if (nsrc <= kSourcesPerPass) {
      for (size_t offset = 0; offset < count; offset += kBlockElems) {
        const size_t len = std::min(kBlockElems, count - offset);
        Pass<true, true>(nullptr, srcs, nsrc, offset, dst, typed_divisor, len);
      }
      return;
    }
    HWY_ALIGN A acc[kBlockElems];
    for (size_t offset = 0; offset < count; offset += kBlockElems) {
      const size_t len = std::min(kBlockElems, count - offset);
      Pass<true, false>(acc, srcs, kSourcesPerPass, offset, dst, typed_divisor, len);
      int s = kSourcesPerPass;
      for (; nsrc - s > kSourcesPerPass; s += kSourcesPerPass) {
        Pass<false, false>(acc, srcs + s, kSourcesPerPass, offset, dst, typed_divisor, len);
      }
      Pass<false, true>(acc, srcs + s, nsrc - s, offset, dst, typed_divisor, len);
    }
  }
};

template <class Codec>
bool RunFloat(RedOp op, const void* const* srcs, int nsrc, void* dst, size_t count, int divisor) {
  switch (op) {
    case RedOp::kSum: Kernel<Codec, SumOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kProd: Kernel<Codec, ProdOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kMin: Kernel<Codec, MinOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kMax: Kernel<Codec, MaxOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kAvg: Kernel<Codec, SumOp, true>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor: return false;  // integers only
  }
  return false;
}

// Integers: sum and prod wrap in the lane type. avg of 8- and 32-bit elements goes through
// float64 lanes (IntAverageCodec); 64-bit avg sums in its own lanes, wrapping like the portable
// kernel, and divides with Average's split division.
template <typename T>
bool RunInt(RedOp op, const void* const* srcs, int nsrc, void* dst, size_t count, int divisor) {
  using Codec = PlainCodec<T>;
  switch (op) {
    case RedOp::kSum: Kernel<Codec, SumOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kMin: Kernel<Codec, MinOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kMax: Kernel<Codec, MaxOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kBand: Kernel<Codec, BandOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kBor: Kernel<Codec, BorOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kBxor: Kernel<Codec, BxorOp, false>::Run(srcs, nsrc, dst, count, divisor); return true;
    case RedOp::kProd:
      if constexpr (sizeof(T) == 1) {
        Kernel<ByteProductCodec, ProdOp, false>::Run(srcs, nsrc, dst, count, divisor);
      } else {
        Kernel<Codec, ProdOp, false>::Run(srcs, nsrc, dst, count, divisor);
      }
      return true;
    case RedOp::kAvg:
      if constexpr (sizeof(T) == 8) {
        if (divisor < 1 || divisor > kMaxWideDivisor) return false;  // beyond the exact split division
        Kernel<Codec, SumOp, true>::Run(srcs, nsrc, dst, count, divisor);
        return true;
      } else {
        if (nsrc > divisor || divisor < 1) return false;  // quotient may leave the element's range
        Kernel<IntAverageCodec<T>, SumOp, true>::Run(srcs, nsrc, dst, count, divisor);
        return true;
      }
  }
  return false;
}

bool RunSimdKernel(DataType dtype, RedOp op, const void* const* srcs, int nsrc, void* dst, size_t count, int divisor) {
  switch (dtype) {
    case DataType::kFloat32: return RunFloat<PlainCodec<float>>(op, srcs, nsrc, dst, count, divisor);
    case DataType::kFloat16: return RunFloat<HalfCodec>(op, srcs, nsrc, dst, count, divisor);
    case DataType::kBFloat16: return RunFloat<BFloat16Codec>(op, srcs, nsrc, dst, count, divisor);
    case DataType::kFloat64: return RunFloat<PlainCodec<double>>(op, srcs, nsrc, dst, count, divisor);
    case DataType::kInt8: return RunInt<int8_t>(op, srcs, nsrc, dst, count, divisor);
    case DataType::kUInt8: return RunInt<uint8_t>(op, srcs, nsrc, dst, count, divisor);
    case DataType::kInt32: return RunInt<int32_t>(op, srcs, nsrc, dst, count, divisor);
    case DataType::kUInt32: return RunInt<uint32_t>(op, srcs, nsrc, dst, count, divisor);
    case DataType::kInt64: return RunInt<int64_t>(op, srcs, nsrc, dst, count, divisor);
    case DataType::kUInt64: return RunInt<uint64_t>(op, srcs, nsrc, dst, count, divisor);
  }
  return false;
}

const char* CurrentTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace optcast::reduce::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace optcast::reduce::detail {

HWY_EXPORT(RunSimdKernel);
HWY_EXPORT(CurrentTargetName);

bool RunSimdKernel(DataType dtype, RedOp op, const void* const* srcs, int nsrc, void* dst, size_t count, int divisor) {
  return HWY_DYNAMIC_DISPATCH(RunSimdKernel)(dtype, op, srcs, nsrc, dst, count, divisor);
}

const char* SimdTargetName() { return HWY_DYNAMIC_DISPATCH(CurrentTargetName)(); }

int64_t CompiledSimdTargets() { return HWY_TARGETS; }

}  // namespace optcast::reduce::detail
#endif  // HWY_ONCE
