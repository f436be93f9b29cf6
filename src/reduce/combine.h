// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>

#include "optcast/status.h"
#include "optcast/types.h"

namespace optcast::reduce {

// dst[i] = op(srcs[0][i], srcs[1][i], ..., srcs[nsrc-1][i]) for i in [0, count), combined strictly
// in the order of `srcs` so the result is bitwise reproducible for a given source order.
// - float16 / bfloat16: accumulated in float32 and rounded to the element type once.
// - integers: sum/prod wrap around in the element type (two's complement); avg forms the sum in
//   64-bit arithmetic and truncates the quotient toward zero.
// - avg for floats: the sum (float32 accumulation for 16-bit types) divided by nsrc.
// - band, bor, bxor: bitwise, integer types only (InvalidArgument for floating-point types).
// `dst` may alias srcs[0] (in-place) but no other source. nsrc >= 1.
Status Combine(DataType dtype, RedOp op, const void* const* srcs, int nsrc, void* dst,
               size_t count);

// Two-operand step used by the ring: dst[i] = op(dst[i], src[i]). avg behaves like sum here
// (the ring divides at the end with FinishAverage). 16-bit floats round after each step, as a
// ring does.
Status Accumulate(DataType dtype, RedOp op, void* dst, const void* src, size_t count);

// In-place division by `divisor` for avg (floats: true division; integers: truncation toward
// zero). Used by algorithms that sum first and divide once at the end.
Status FinishAverage(DataType dtype, void* buf, size_t count, int divisor);

}  // namespace optcast::reduce
