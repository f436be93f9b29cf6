// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// How float16 and bfloat16 load into float32 lanes and store back from them, round to nearest
// even with NaNs quieted: the codecs of the server's reduction kernels (simd_kernels.cc, one copy
// per instruction set) and of the float32 wire conversions (wire_convert.cc, the build's own
// instruction set). Highway's per-target include guard: included once per target.

#if defined(OPTCAST_REDUCE_FLOAT16_CODECS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OPTCAST_REDUCE_FLOAT16_CODECS_INL_H_
#undef OPTCAST_REDUCE_FLOAT16_CODECS_INL_H_
#else
#define OPTCAST_REDUCE_FLOAT16_CODECS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace optcast::reduce::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Demotes 32-bit lanes holding values < 2^16 to 16 bits (the saturating pack is exact there).
template <class DF>
void StoreLow16(DF df, hn::Vec<hn::RebindToUnsigned<DF>> bits, uint16_t* p) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, bits)), du16, p);
}

struct HalfCodec {
  using Storage = uint16_t;
  using Acc = float;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  // F16C (vcvtph2ps / vcvtps2ph): round to nearest even, NaNs quieted with payload kept.
  template <class D>
  static hn::Vec<D> Load(D d, const Storage* p) {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  template <class D>
  static void Store(D d, hn::Vec<D> v, Storage* p) {
    const hn::Rebind<hwy::float16_t, D> dh;
    hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
  }
#else
  // No conversion instructions: the branch-free bit manipulation of half_inline.h in lanes
  // (Highway's own fallback truncates instead of rounding).
  template <class D>
  static hn::Vec<D> Load(D d, const Storage* p) {
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint16_t, D> du16;
    const auto h = hn::PromoteTo(du, hn::LoadU(du16, p));
    const auto magnitude = hn::And(h, hn::Set(du, 0x7fffu));
    const auto shifted = hn::ShiftLeft<13>(magnitude);
    const auto exponent = hn::And(shifted, hn::Set(du, 0x0f800000u));
    const auto zero_or_subnormal = hn::RebindMask(d, exponent == hn::Zero(du));
    const auto inf_or_nan = hn::RebindMask(d, exponent == hn::Set(du, 0x0f800000u));
    auto bits = hn::Add(shifted, hn::Set(du, (127u - 15u) << 23));
    bits =
        hn::Add(bits, hn::BitCast(du, hn::IfThenElseZero(inf_or_nan, hn::BitCast(d, hn::Set(du, (128u - 16u) << 23)))));
    bits = hn::Add(bits, hn::BitCast(du, hn::IfThenElseZero(zero_or_subnormal, hn::BitCast(d, hn::Set(du, 1u << 23)))));
    const auto offset = hn::IfThenElseZero(zero_or_subnormal, hn::BitCast(d, hn::Set(du, 0x38800000u)));
    auto result = hn::BitCast(du, hn::Sub(hn::BitCast(d, bits), offset));
    const auto is_nan = hn::RebindMask(d, hn::BitCast(di, magnitude) > hn::Set(di, 0x7c00));
    result = hn::Or(result, hn::BitCast(du, hn::IfThenElseZero(is_nan, hn::BitCast(d, hn::Set(du, 0x00400000u)))));
    const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
    return hn::BitCast(d, hn::Or(result, sign));
  }
  template <class D>
  static void Store(D d, hn::Vec<D> v, Storage* p) {
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto bits = hn::BitCast(du, v);
    const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u));
    const auto umagnitude = hn::And(bits, hn::Set(du, 0x7fffffffu));
    const auto magnitude = hn::BitCast(di, umagnitude);  // < 2^31: signed compares are exact
    const auto nan = hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(umagnitude), hn::Set(du, 0x3ffu)));
    const auto odd = hn::And(hn::ShiftRight<13>(umagnitude), hn::Set(du, 1u));
    const auto normal = hn::ShiftRight<13>(
        hn::Add(hn::Sub(umagnitude, hn::Set(du, (127u - 15u) << 23)), hn::Add(hn::Set(du, 0xfffu), odd)));
    const auto subnormal =
        hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, umagnitude), hn::Set(d, 0.5f))), hn::Set(du, 0x3f000000u));
    const auto tiny = hn::RebindMask(du, magnitude < hn::Set(di, 0x38800000));
    const auto overflow = hn::RebindMask(du, magnitude > hn::Set(di, 0x47800000 - 1));
    const auto is_nan = hn::RebindMask(du, magnitude > hn::Set(di, 0x7f800000));
    const auto finite = hn::IfThenElse(tiny, subnormal, normal);
    const auto result = hn::IfThenElse(is_nan, nan, hn::IfThenElse(overflow, hn::Set(du, 0x7c00u), finite));
    StoreLow16(d, hn::Or(sign, result), p);
  }
#endif
};

struct BFloat16Codec {
  using Storage = uint16_t;
  using Acc = float;
  template <class D>
  static hn::Vec<D> Load(D d, const Storage* p) {
    const hn::RebindToUnsigned<D> du;
    const hn::Rebind<uint16_t, D> du16;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, p))));
  }
  // Round to nearest even on the 16 dropped bits (Highway's DemoteTo truncates); NaNs quieted.
  template <class D>
  static void Store(D d, hn::Vec<D> v, Storage* p) {
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto bits = hn::BitCast(du, v);
    const auto high = hn::ShiftRight<16>(bits);
    const auto rounded =
        hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), hn::And(high, hn::Set(du, 1u)))));
    const auto magnitude = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7fffffffu)));
    const auto is_nan = hn::RebindMask(du, magnitude > hn::Set(di, 0x7f800000));
    StoreLow16(d, hn::IfThenElse(is_nan, hn::Or(high, hn::Set(du, 0x0040u)), rounded), p);
  }
};

}  // namespace HWY_NAMESPACE
}  // namespace optcast::reduce::detail
HWY_AFTER_NAMESPACE();

#endif  // OPTCAST_REDUCE_FLOAT16_CODECS_INL_H_
