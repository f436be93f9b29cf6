// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>

#include "optcast/types.h"

namespace optcast::tools {

// Benchmark inputs chosen so every reduction is exact in every type (small integers), and the
// expected result computed independently of the reduction kernels, in 64-bit arithmetic.
void FillBenchInput(DataType dtype, RedOp op, int rank, void* buf, size_t count);
// Number of elements of `result` that differ from the expected reduction over `nranks` ranks.
// `wire`: the type float32 travelled in (kFloat32: as it is). On a 16-bit wire a float32 sum,
// avg, min or max may differ from the exact result by WireErrorBound(wire, nranks) times the sum
// of the inputs' magnitudes (divided by nranks for avg).
uint64_t CountWrong(DataType dtype, RedOp op, int nranks, const void* result, size_t count,
                    DataType wire = DataType::kFloat32);

// The error float32 data on `wire` may carry, as a fraction of the sum of the inputs' magnitudes,
// from the format alone: with u the wire type's unit roundoff (2^-8 bfloat16, 2^-11 float16),
// rounding the inputs moves the sum by at most u of it, the servers' float32 fold by
// (nranks - 1) * 2^-24, and rounding the result by u of the result: 2u + 4u^2 + nranks * 2^-23.
double WireErrorBound(DataType wire, int nranks);

}  // namespace optcast::tools
