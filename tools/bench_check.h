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
uint64_t CountWrong(DataType dtype, RedOp op, int nranks, const void* result, size_t count);

}  // namespace optcast::tools
