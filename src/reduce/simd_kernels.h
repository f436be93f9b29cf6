// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>

#include "optcast/types.h"

namespace optcast::reduce::detail {

// The Highway kernels behind Combine, compiled for several instruction sets (SSE4, AVX2,
// AVX-512) and picked at run time for the CPU at hand. Same contract as Combine, arguments
// already validated; `divisor` is what avg divides by.
//
// Returns false for the integer avg cases the vector kernels do not take: 8/32-bit elements
// with nsrc > divisor (the quotient may leave the element's range) and 64-bit elements with a
// divisor above 2^20 (beyond the exact split division). The caller runs the portable kernel.
bool RunSimdKernel(DataType dtype, RedOp op, const void* const* srcs, int nsrc, void* dst, size_t count, int divisor);

// Name of the instruction set RunSimdKernel uses on this CPU, e.g. "AVX2".
const char* SimdTargetName();

// Highway target bits (HWY_AVX2, ...) the kernels were compiled for; tests run each one the CPU
// has.
int64_t CompiledSimdTargets();

}  // namespace optcast::reduce::detail
