// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "reduce/combine.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "reduce/half_inline.h"
#include "reduce/simd_kernels.h"

namespace optcast::reduce {
namespace {

// The element loop works on blocks that stay in L1: each source of a block is folded into a
// local accumulator array, then the block is narrowed into dst. Full blocks and the 64-element
// sub-blocks of the tail have compile-time trip counts and touch only a local array besides
// their streams, which is what gcc -O2 (very-cheap cost model: no alias versioning, no epilogue)
// needs to vectorize them. Only the last < 64 elements run scalar.
constexpr size_t kBlockElems = 1024;
constexpr size_t kSubBlockElems = 64;
// Sources folded per pass over the accumulator: enough to amortize its L1 traffic, few enough
// that the hardware prefetchers track every stream.
constexpr int kMaxSourcesPerPass = 4;

// ---- Codecs: how one DataType widens into its accumulator type and narrows back. ----

// Identity-width types. Acc may be the unsigned twin of Storage so integer sum/prod wrap
// without signed-overflow UB; the narrowing cast back is modular (C++20).
template <typename StorageT, typename AccT>
struct PlainCodec {
  using Storage = StorageT;
  using Acc = AccT;
  static Acc Load(Storage v) { return static_cast<Acc>(v); }
  static Storage Store(Acc v) { return static_cast<Storage>(v); }
  // Only instantiated for floating Acc (true division).
  static Storage StoreAverage(Acc sum, Acc divisor) { return static_cast<Storage>(sum / divisor); }
};

struct HalfCodec {
  using Storage = uint16_t;
  using Acc = float;
  static Acc Load(Storage v) { return detail::HalfBitsToFloat(v); }
  static Storage Store(Acc v) { return detail::FloatToHalfBits(v); }
  static Storage StoreAverage(Acc sum, Acc divisor) { return Store(sum / divisor); }
};

struct BFloat16Codec {
  using Storage = uint16_t;
  using Acc = float;
  static Acc Load(Storage v) { return detail::BFloat16BitsToFloat(v); }
  static Storage Store(Acc v) { return detail::FloatToBFloat16Bits(v); }
  static Storage StoreAverage(Acc sum, Acc divisor) { return Store(sum / divisor); }
};

// Integer avg: the sum is formed in 64 bits (wrapping, via uint64 so int64 overflow is not UB),
// then divided with truncation toward zero in the signedness of the element type.
template <typename StorageT>
struct IntAverageCodec {
  using Storage = StorageT;
  using Acc = uint64_t;
  static Acc Load(Storage v) { return static_cast<Acc>(v); }  // sign-extends signed types
  static Storage StoreAverage(Acc sum, Acc divisor) {
    if constexpr (std::is_signed_v<Storage>) {
      return static_cast<Storage>(static_cast<int64_t>(sum) / static_cast<int64_t>(divisor));
    } else {
      return static_cast<Storage>(sum / divisor);
    }
  }
};

// ---- Operators, applied as op(accumulated, next) in source order. ----

struct SumOp {
  template <typename A>
  static A Apply(A acc, A v) {
    return static_cast<A>(acc + v);
  }
};
struct ProdOp {
  template <typename A>
  static A Apply(A acc, A v) {
    // Narrow unsigned types promote to int, where e.g. 65535 * 65535 would overflow: multiply
    // them as unsigned int instead.
    using Wide = std::conditional_t<std::is_integral_v<A> && sizeof(A) < sizeof(unsigned), unsigned, A>;
    return static_cast<A>(static_cast<Wide>(acc) * static_cast<Wide>(v));
  }
};
// Plain comparisons, not IEEE minNum: min = acc < v ? acc : v, max = acc > v ? acc : v. This is
// exactly x86 minps/maxps, so gcc vectorizes it. With a NaN the result depends on position
// (min(NaN, 1) == 1, min(1, NaN) == NaN) but is deterministic for a given source order.
struct MinOp {
  template <typename A>
  static A Apply(A acc, A v) {
    return acc < v ? acc : v;
  }
};
struct MaxOp {
  template <typename A>
  static A Apply(A acc, A v) {
    return acc > v ? acc : v;
  }
};

// Bitwise ops, integers only: no carries, so the result is the same bits in any width.
struct BandOp {
  template <typename A>
  static A Apply(A acc, A v) {
    return static_cast<A>(acc & v);
  }
};
struct BorOp {
  template <typename A>
  static A Apply(A acc, A v) {
    return static_cast<A>(acc | v);
  }
};
struct BxorOp {
  template <typename A>
  static A Apply(A acc, A v) {
    return static_cast<A>(acc ^ v);
  }
};

// ---- Block kernels. kLen != 0 fixes the trip count at compile time; 0 means use `len`. ----

template <typename Codec, typename Op, bool kAverage>
struct Kernel {
  using S = typename Codec::Storage;
  using A = typename Codec::Acc;

  static const S* Typed(const void* p) { return static_cast<const S*>(p); }

  // First pass: acc[i] = op(srcs[0][i], ..., srcs[kSources-1][i]).
  // Later passes: acc[i] = op(acc[i], srcs[0][i], ..., srcs[kSources-1][i]).
  template <bool kFirstPass, int kSources, size_t kLen>
  static void Fold(A* acc, const void* const* srcs, size_t offset, size_t len) {
    const size_t n = kLen != 0 ? kLen : len;
    const S* s0 = Typed(srcs[0]) + offset;
    const S* s1 = kSources > 1 ? Typed(srcs[1]) + offset : nullptr;
    const S* s2 = kSources > 2 ? Typed(srcs[2]) + offset : nullptr;
    const S* s3 = kSources > 3 ? Typed(srcs[3]) + offset : nullptr;
    for (size_t i = 0; i < n; ++i) {
      A v;
      if constexpr (kFirstPass) {
        v = Codec::Load(s0[i]);
      } else {
        v = Op::Apply(acc[i], Codec::Load(s0[i]));
      }
      if constexpr (kSources > 1) v = Op::Apply(v, Codec::Load(s1[i]));
      if constexpr (kSources > 2) v = Op::Apply(v, Codec::Load(s2[i]));
      if constexpr (kSources > 3) v = Op::Apply(v, Codec::Load(s3[i]));
      acc[i] = v;
    }
  }

  template <size_t kLen>
  static void Finish(const A* acc, S* dst, A divisor, size_t offset, size_t len) {
    const size_t n = kLen != 0 ? kLen : len;
    S* d = dst + offset;
    for (size_t i = 0; i < n; ++i) {
      if constexpr (kAverage) {
        d[i] = Codec::StoreAverage(acc[i], divisor);
      } else {
        d[i] = Codec::Store(acc[i]);
      }
    }
  }

  // Folds `sources` (1..kMaxSourcesPerPass) sources; the switch runs per block, not per element.
  template <bool kFirstPass, size_t kLen>
  static void Pass(A* acc, const void* const* srcs, int sources, size_t offset, size_t len) {
    static_assert(kMaxSourcesPerPass == 4);
    switch (sources) {
      case 1: return Fold<kFirstPass, 1, kLen>(acc, srcs, offset, len);
      case 2: return Fold<kFirstPass, 2, kLen>(acc, srcs, offset, len);
      case 3: return Fold<kFirstPass, 3, kLen>(acc, srcs, offset, len);
      default: return Fold<kFirstPass, 4, kLen>(acc, srcs, offset, len);
    }
  }

  // One block: every source folded in order into acc, then narrowed into dst. dst is written
  // only after all sources of the block were read, which is what makes dst == srcs[0] safe.
  template <size_t kLen>
  static void Block(const void* const* srcs, int nsrc, S* dst, A divisor, size_t offset, size_t len) {
    alignas(64) A acc[kBlockElems];
    const int first = std::min(nsrc, kMaxSourcesPerPass);
    Pass<true, kLen>(acc, srcs, first, offset, len);
    for (int s = first; s < nsrc; s += kMaxSourcesPerPass) {
      Pass<false, kLen>(acc, srcs + s, std::min(nsrc - s, kMaxSourcesPerPass), offset, len);
    }
    Finish<kLen>(acc, dst, divisor, offset, len);
  }

  static void Run(const void* const* srcs, int nsrc, void* untyped_dst, size_t count, int divisor) {
    S* dst = static_cast<S*>(untyped_dst);
    const A typed_divisor = static_cast<A>(divisor);
    size_t i = 0;
    for (; i + kBlockElems <= count; i += kBlockElems) {
      Block<kBlockElems>(srcs, nsrc, dst, typed_divisor, i, kBlockElems);
    }
    for (; i + kSubBlockElems <= count; i += kSubBlockElems) {
      Block<kSubBlockElems>(srcs, nsrc, dst, typed_divisor, i, kSubBlockElems);
    }
    if (i < count) Block<0>(srcs, nsrc, dst, typed_divisor, i, count - i);
  }
};

using RunFn = void (*)(const void* const*, int, void*, size_t, int);

template <typename Codec>
RunFn SelectFloatKernel(RedOp op) {
  switch (op) {
    case RedOp::kSum: return &Kernel<Codec, SumOp, false>::Run;
    case RedOp::kProd: return &Kernel<Codec, ProdOp, false>::Run;
    case RedOp::kMin: return &Kernel<Codec, MinOp, false>::Run;
    case RedOp::kMax: return &Kernel<Codec, MaxOp, false>::Run;
    case RedOp::kAvg: return &Kernel<Codec, SumOp, true>::Run;
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor: return nullptr;  // refused by CheckTypeAndOp
  }
  return nullptr;
}

template <typename T>
RunFn SelectIntKernel(RedOp op) {
  using Wrapping = PlainCodec<T, std::make_unsigned_t<T>>;
  using Exact = PlainCodec<T, T>;
  switch (op) {
    case RedOp::kSum: return &Kernel<Wrapping, SumOp, false>::Run;
    case RedOp::kProd: return &Kernel<Wrapping, ProdOp, false>::Run;
    case RedOp::kMin: return &Kernel<Exact, MinOp, false>::Run;
    case RedOp::kMax: return &Kernel<Exact, MaxOp, false>::Run;
    case RedOp::kAvg: return &Kernel<IntAverageCodec<T>, SumOp, true>::Run;
    case RedOp::kBand: return &Kernel<Wrapping, BandOp, false>::Run;
    case RedOp::kBor: return &Kernel<Wrapping, BorOp, false>::Run;
    case RedOp::kBxor: return &Kernel<Wrapping, BxorOp, false>::Run;
  }
  return nullptr;
}

RunFn SelectKernel(DataType dtype, RedOp op) {
  switch (dtype) {
    case DataType::kFloat32: return SelectFloatKernel<PlainCodec<float, float>>(op);
    case DataType::kFloat16: return SelectFloatKernel<HalfCodec>(op);
    case DataType::kBFloat16: return SelectFloatKernel<BFloat16Codec>(op);
    case DataType::kFloat64: return SelectFloatKernel<PlainCodec<double, double>>(op);
    case DataType::kInt8: return SelectIntKernel<int8_t>(op);
    case DataType::kUInt8: return SelectIntKernel<uint8_t>(op);
    case DataType::kInt32: return SelectIntKernel<int32_t>(op);
    case DataType::kUInt32: return SelectIntKernel<uint32_t>(op);
    case DataType::kInt64: return SelectIntKernel<int64_t>(op);
    case DataType::kUInt64: return SelectIntKernel<uint64_t>(op);
  }
  return nullptr;
}

Status CheckTypeAndOp(DataType dtype, RedOp op) {
  if (!IsValidDataType(static_cast<uint8_t>(dtype))) {
    return InvalidArgument("unknown data type " + std::to_string(static_cast<int>(dtype)) +
                           "; use one of the optcast::DataType values");
  }
  if (!IsValidRedOp(static_cast<uint8_t>(op))) {
    return InvalidArgument("unknown reduction op " + std::to_string(static_cast<int>(op)) +
                           "; use one of sum, prod, min, max, avg, band, bor, bxor");
  }
  if (!IsRedOpDefinedFor(op, dtype)) return InvalidArgument(UndefinedRedOpMessage(op, dtype));
  return Status::Ok();
}

// Shared by Combine, Accumulate and FinishAverage: avg divides by `divisor`, not by nsrc.
Status Reduce(DataType dtype, RedOp op, const void* const* srcs, int nsrc, void* dst, size_t count, int divisor) {
  OPTCAST_RETURN_IF_ERROR(CheckTypeAndOp(dtype, op));
  if (nsrc < 1) {
    return InvalidArgument("reduction needs at least one source, got nsrc=" + std::to_string(nsrc));
  }
  if (count == 0) return Status::Ok();
  if (srcs == nullptr || dst == nullptr) {
    return InvalidArgument("reduction of " + std::to_string(count) + " elements got a null source list or destination");
  }
  for (int s = 0; s < nsrc; ++s) {
    if (srcs[s] == nullptr) {
      return InvalidArgument("reduction source " + std::to_string(s) + " is null");
    }
  }
  if (!detail::RunSimdKernel(dtype, op, srcs, nsrc, dst, count, divisor)) {
    SelectKernel(dtype, op)(srcs, nsrc, dst, count, divisor);
  }
  return Status::Ok();
}

}  // namespace

Status Combine(DataType dtype, RedOp op, const void* const* srcs, int nsrc, void* dst, size_t count) {
  return Reduce(dtype, op, srcs, nsrc, dst, count, nsrc);
}

Status Accumulate(DataType dtype, RedOp op, void* dst, const void* src, size_t count) {
  OPTCAST_RETURN_IF_ERROR(CheckTypeAndOp(dtype, op));
  // A two-source combine into srcs[0] is exactly one ring step: 16-bit floats widen, combine
  // and round once. avg is a plain sum until FinishAverage.
  const void* srcs[2] = {dst, src};
  return Reduce(dtype, op == RedOp::kAvg ? RedOp::kSum : op, srcs, 2, dst, count, 1);
}

Status FinishAverage(DataType dtype, void* buf, size_t count, int divisor) {
  if (divisor < 1) {
    return InvalidArgument("average divisor must be >= 1, got " + std::to_string(divisor));
  }
  // One source, op avg: widen, divide once (float32 for 16-bit floats), narrow.
  const void* srcs[1] = {buf};
  return Reduce(dtype, RedOp::kAvg, srcs, 1, buf, count, divisor);
}

}  // namespace optcast::reduce
