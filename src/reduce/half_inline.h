// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Inline, branch-free float16/bfloat16 <-> float32 conversions. They live in a header so the
// combine loops can inline them. Every case is computed and the answer picked with bit masks, not
// ?: -- gcc turns ?: into branches, sinks the float ops into them and then (with the default
// -ftrapping-math) refuses to if-convert, which kills auto-vectorization on baseline x86-64.
//
// NaN policy (matches F16C vcvtph2ps/vcvtps2ph and Arm FCVT): sign and the leading payload bits
// are kept and the quiet bit is set, so a NaN stays a NaN but a signalling NaN comes out quiet.
// bfloat16 -> float32 is the plain 16-bit shift every implementation uses, so it keeps the bits.

#include <bit>
#include <cstdint>

namespace optcast::reduce::detail {

// All ones when `condition` holds, else zero; a SIMD compare result.
inline uint32_t MaskIf(bool condition) { return 0u - static_cast<uint32_t>(condition); }
inline uint32_t Select(uint32_t mask, uint32_t if_set, uint32_t if_clear) {
  return (if_set & mask) | (if_clear & ~mask);
}

inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t magnitude = h & 0x7fffu;    // exponent and mantissa
  const uint32_t shifted = magnitude << 13;  // both land in their float32 positions
  const uint32_t exponent = shifted & 0x0f800000u;
  const uint32_t is_zero_or_subnormal = MaskIf(exponent == 0);
  const uint32_t is_inf_or_nan = MaskIf(exponent == 0x0f800000u);
  // Rebias the exponent from 15 to 127; inf/NaN go on to the all-ones exponent.
  uint32_t bits = shifted + ((127u - 15u) << 23);
  bits += is_inf_or_nan & ((128u - 16u) << 23);
  // Zero/subnormal: read as 2^-14 * (1 + m/1024), then subtract 2^-14 (exact) to get m * 2^-24.
  bits += is_zero_or_subnormal & (1u << 23);
  const float subnormal_offset = std::bit_cast<float>(is_zero_or_subnormal & 0x38800000u);
  uint32_t result = std::bit_cast<uint32_t>(std::bit_cast<float>(bits) - subnormal_offset);
  result |= MaskIf(magnitude > 0x7c00u) & 0x00400000u;  // quiet NaNs
  return std::bit_cast<float>(result | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

inline uint16_t FloatToHalfBits(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  // Magnitude fits in 31 bits, so signed compares are exact (SSE2 has no unsigned compare).
  const int32_t magnitude = static_cast<int32_t>(bits & 0x7fffffffu);
  const uint32_t umagnitude = static_cast<uint32_t>(magnitude);

  const uint32_t nan = 0x7e00u | ((umagnitude >> 13) & 0x3ffu);
  // Normal range: rebias and round to nearest even on the 13 dropped bits. A carry out of the
  // mantissa correctly bumps the exponent, up to infinity for values >= 65520.
  const uint32_t odd = (umagnitude >> 13) & 1u;
  const uint32_t normal = (umagnitude - ((127u - 15u) << 23) + 0xfffu + odd) >> 13;
  // Below 2^-14 the result is subnormal: adding 0.5f (ulp 2^-24, the half subnormal step) makes
  // the FPU round to nearest even at exactly the right bit; 0x400 means "rounded up to 2^-14".
  const float magnitude_f = std::bit_cast<float>(umagnitude);
  const uint32_t subnormal = std::bit_cast<uint32_t>(magnitude_f + 0.5f) - 0x3f000000u;

  const uint32_t finite = Select(MaskIf(magnitude < 0x38800000), subnormal, normal);  // < 2^-14
  const uint32_t result =
      Select(MaskIf(magnitude > 0x7f800000), nan, Select(MaskIf(magnitude >= 0x47800000), 0x7c00u, finite));
  return static_cast<uint16_t>(sign | result);
}

inline float BFloat16BitsToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const int32_t magnitude = static_cast<int32_t>(bits & 0x7fffffffu);
  // Round to nearest even on the 16 dropped bits; overflow carries into infinity.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t nan = (bits >> 16) | 0x0040u;
  return static_cast<uint16_t>(Select(MaskIf(magnitude > 0x7f800000), nan, rounded));
}

}  // namespace optcast::reduce::detail
