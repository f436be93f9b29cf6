// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The arithmetic of an aggregation tree (docs/tree.md). A server below the root combines its
// members' contributions into a *partial* and sends it upstream; only the root turns the partial
// into the result. Partials travel in a type wide enough that the result is rounded once, at the
// root: float32 for float16/bfloat16, 64-bit integers for an integer avg (whose sum is formed in
// 64 bits, as reduce/combine.h does), the element type otherwise. avg travels as a sum and is
// divided once, at the root, by the job's rank count.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "optcast/status.h"
#include "optcast/types.h"

namespace optcast::server {

// The type partial results of (dtype, op) travel in.
DataType PartialType(DataType dtype, RedOp op);

// The operator that combines partials: avg combines as a sum.
RedOp PartialOp(RedOp op);

// dst = op(srcs[0], ..., srcs[n-1]) in the order of `srcs`, in the partial type. srcs[i] holds
// `count` elements of the partial type when is_partial[i], else of `dtype` (a rank's own data).
// `scratch` holds widened copies between calls.
Status CombineToPartial(DataType dtype, RedOp op, const void* const* srcs, const bool* is_partial, int n, void* dst,
                        size_t count, std::vector<uint8_t>* scratch);

// Turns the root's partial into the result, in place: avg divides by `nranks`, then the values
// narrow to `dtype` (the first count * DataTypeSize(dtype) bytes of `buf` hold the result).
Status FinishPartial(DataType dtype, RedOp op, void* buf, size_t count, uint32_t nranks);

}  // namespace optcast::server
