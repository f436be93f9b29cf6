// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "reduce/half.h"

#include "reduce/half_inline.h"

namespace optcast::reduce {

float HalfToFloat(uint16_t h) { return detail::HalfBitsToFloat(h); }
uint16_t FloatToHalf(float f) { return detail::FloatToHalfBits(f); }
float BFloat16ToFloat(uint16_t b) { return detail::BFloat16BitsToFloat(b); }
uint16_t FloatToBFloat16(float f) { return detail::FloatToBFloat16Bits(f); }

}  // namespace optcast::reduce
