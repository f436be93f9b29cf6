// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Slow, obviously-correct references for the reduce tests. They share no code with
// src/reduce: binary16/bfloat16 are decoded with ldexp and rounded with frexp + nearbyint on
// doubles, so a bug in the bit tricks of half_inline.h cannot hide in both places.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace optcast::reduce::reference {

// A binary floating-point format narrower than double.
struct Format {
  int precision;     // significant bits, including the implicit one
  int min_exponent;  // exponent of the smallest normal number
  int exponent_bits;
  int bias;
  double max_finite;
};

inline constexpr Format kBinary16{11, -14, 5, 15, 65504.0};
inline constexpr Format kBFloat16{8, -126, 8, 127, 0x1.fep127};

inline int MantissaBits(const Format& f) { return f.precision - 1; }
inline uint32_t ExponentMask(const Format& f) { return (1u << f.exponent_bits) - 1; }

inline bool IsNaNBits(const Format& f, uint16_t bits) {
  const uint32_t exponent = (bits >> MantissaBits(f)) & ExponentMask(f);
  const uint32_t mantissa = bits & ((1u << MantissaBits(f)) - 1);
  return exponent == ExponentMask(f) && mantissa != 0;
}

inline uint16_t QuietBit(const Format& f) { return static_cast<uint16_t>(1u << (MantissaBits(f) - 1)); }

// Value of a non-NaN bit pattern.
inline double Decode(const Format& f, uint16_t bits) {
  const bool negative = (bits >> 15) != 0;
  const int exponent = static_cast<int>((bits >> MantissaBits(f)) & ExponentMask(f));
  const int mantissa = bits & ((1 << MantissaBits(f)) - 1);
  double magnitude;
  if (exponent == static_cast<int>(ExponentMask(f))) {
    magnitude = INFINITY;
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, f.min_exponent - MantissaBits(f));
  } else {
    magnitude = std::ldexp(mantissa + (1 << MantissaBits(f)), exponent - f.bias - MantissaBits(f));
  }
  return negative ? -magnitude : magnitude;
}

// x rounded to nearest-even in the format (inf past the overflow threshold), as a double.
inline double RoundToFormat(const Format& f, double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int exponent;
  std::frexp(x, &exponent);                                 // |x| in [2^(exponent-1), 2^exponent)
  const int lead = std::max(exponent - 1, f.min_exponent);  // subnormals share the minimum
  const double quantum = std::ldexp(1.0, lead - MantissaBits(f));
  const double rounded = std::nearbyint(x / quantum) * quantum;  // default mode: ties to even
  if (std::fabs(rounded) > f.max_finite) return std::copysign(INFINITY, x);
  return rounded;
}

// Bit pattern of a value already representable in the format (or +-inf).
inline uint16_t Encode(const Format& f, double value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(value);
  const uint32_t exponent_all_ones = ExponentMask(f) << MantissaBits(f);
  if (std::isinf(magnitude)) return static_cast<uint16_t>(sign | exponent_all_ones);
  if (magnitude < std::ldexp(1.0, f.min_exponent)) {
    const double mantissa = std::ldexp(magnitude, MantissaBits(f) - f.min_exponent);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(mantissa));
  }
  int exponent;
  const double fraction = std::frexp(magnitude, &exponent);  // [0.5, 1)
  const uint32_t mantissa = static_cast<uint32_t>(std::ldexp(fraction, f.precision)) - (1u << MantissaBits(f));
  const uint32_t biased = static_cast<uint32_t>(exponent - 1 + f.bias);
  return static_cast<uint16_t>(sign | (biased << MantissaBits(f)) | mantissa);
}

inline uint16_t RoundAndEncode(const Format& f, double x) { return Encode(f, RoundToFormat(f, x)); }

// Distance in representable values between two non-NaN patterns (+0 and -0 coincide, inf is
// one step past the largest finite value).
inline int64_t UlpDistance(uint16_t a, uint16_t b) {
  auto ordinal = [](uint16_t v) -> int64_t {
    const int64_t magnitude = v & 0x7fff;
    return (v & 0x8000) ? -magnitude : magnitude;
  };
  return std::llabs(ordinal(a) - ordinal(b));
}

// The documented min/max of Combine: plain comparisons, the accumulated value on the left.
template <typename T>
T PlainMin(T acc, T v) {
  return acc < v ? acc : v;
}
template <typename T>
T PlainMax(T acc, T v) {
  return acc > v ? acc : v;
}

}  // namespace optcast::reduce::reference
