// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// Highway compiles the conversions twice (foreach_target.h re-includes this file): for AVX2 and
// for the build's baseline. The pick is made here from CPUID, not by HWY_DYNAMIC_DISPATCH: that
// needs libhwy.so, and the libraries users copy into their images (the NCCL plugin) link this
// and may ask for nothing but the C/C++ runtime.

#include "reduce/wire_convert.h"

#include <fmt/format.h>

// Every x86 target but AVX2 is disabled (the baseline is always compiled): the conversions are a
// few lane operations per element and run at memory speed with AVX2's 8 lanes.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3 | HWY_AVX3_DL)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "reduce/wire_convert.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "reduce/float16_codecs-inl.h"

HWY_BEFORE_NAMESPACE();
namespace optcast::reduce::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class Codec>
void NarrowWith(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, size_t count) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + 2 * lanes <= count; i += 2 * lanes) {
    Codec::Store(d, hn::LoadU(d, src + i), dst + i);
    Codec::Store(d, hn::LoadU(d, src + i + lanes), dst + i + lanes);
  }
  for (; i + lanes <= count; i += lanes) Codec::Store(d, hn::LoadU(d, src + i), dst + i);
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) Codec::Store(d1, hn::LoadU(d1, src + i), dst + i);
}

template <class Codec>
void WidenWith(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t count) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + 2 * lanes <= count; i += 2 * lanes) {
    hn::StoreU(Codec::Load(d, src + i), d, dst + i);
    hn::StoreU(Codec::Load(d, src + i + lanes), d, dst + i + lanes);
  }
  for (; i + lanes <= count; i += lanes) hn::StoreU(Codec::Load(d, src + i), d, dst + i);
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) hn::StoreU(Codec::Load(d1, src + i), d1, dst + i);
}

bool Narrow(DataType wire, const float* src, uint16_t* dst, size_t count) {
  switch (wire) {
    case DataType::kBFloat16: NarrowWith<BFloat16Codec>(src, dst, count); return true;
    case DataType::kFloat16: NarrowWith<HalfCodec>(src, dst, count); return true;
    default: return false;
  }
}

bool Widen(DataType wire, const uint16_t* src, float* dst, size_t count) {
  switch (wire) {
    case DataType::kBFloat16: WidenWith<BFloat16Codec>(src, dst, count); return true;
    case DataType::kFloat16: WidenWith<HalfCodec>(src, dst, count); return true;
    default: return false;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace optcast::reduce::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#if HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX2)
#include <cpuid.h>
#endif

namespace optcast::reduce {
namespace {

// What Highway's AVX2 target compiles for (hwy/ops/set_macros-inl.h, HWY_TARGET_STR_AVX2), and
// the OS saving the AVX registers.
bool CpuRunsAvx2Target() {
#if HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX2)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const bool leaf1 = (c & bit_SSSE3) && (c & bit_SSE4_1) && (c & bit_SSE4_2) && (c & bit_PCLMUL) && (c & bit_AES) &&
                     (c & bit_FMA) && (c & bit_OSXSAVE) && (c & bit_AVX) && (c & bit_F16C);
  if (!leaf1) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6) != 0x6) return false;  // XMM and YMM state
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b & bit_AVX2) && (b & bit_BMI) && (b & bit_BMI2);
#else
  return false;
#endif
}

using NarrowFn = bool (*)(DataType, const float*, uint16_t*, size_t);
using WidenFn = bool (*)(DataType, const uint16_t*, float*, size_t);

struct Kernels {
  NarrowFn narrow;
  WidenFn widen;
};

const Kernels& Chosen() {
  static const Kernels chosen = [] {
#if HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX2)
    if (CpuRunsAvx2Target()) return Kernels{&detail::N_AVX2::Narrow, &detail::N_AVX2::Widen};
#endif
    return Kernels{&detail::HWY_STATIC_DISPATCH(Narrow), &detail::HWY_STATIC_DISPATCH(Widen)};
  }();
  return chosen;
}

Status NotAWireType(DataType wire) {
  return InvalidArgument(
      fmt::format("float32 cannot travel as {}; the wire types are bfloat16 and float16", DataTypeName(wire)));
}

}  // namespace

Status NarrowFloat32(DataType wire, const float* src, uint16_t* dst, size_t count) {
  return Chosen().narrow(wire, src, dst, count) ? Status::Ok() : NotAWireType(wire);
}

Status WidenToFloat32(DataType wire, const uint16_t* src, float* dst, size_t count) {
  return Chosen().widen(wire, src, dst, count) ? Status::Ok() : NotAWireType(wire);
}

}  // namespace optcast::reduce
#endif  // HWY_ONCE
