// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// float32 data on a 16-bit wire (CommunicatorOptions::wire_dtype): a rank rounds its float32
// input to bfloat16 or float16 once, the servers sum the 16-bit values in float32 and round the
// result once (reduce/combine.h), and the rank widens that result back to float32. These are the
// two conversions, in the Highway kernels of simd_kernels.cc: round to nearest even, NaNs kept
// (quieted), the same bits as half.h's scalar functions.

#include <cstddef>
#include <cstdint>

#include "optcast/status.h"
#include "optcast/types.h"

namespace optcast::reduce {

// dst[i] = wire(src[i]) for i in [0, count). InvalidArgument for another wire type.
Status NarrowFloat32(DataType wire, const float* src, uint16_t* dst, size_t count);

// dst[i] = float32(src[i]), exact. InvalidArgument for another wire type.
Status WidenToFloat32(DataType wire, const uint16_t* src, float* dst, size_t count);

}  // namespace optcast::reduce
