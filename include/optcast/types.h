// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace optcast {

// Element types. Values are stable: they travel on the wire.
enum class DataType : uint8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat64 = 3,
  kInt8 = 4,
  kUInt8 = 5,
  kInt32 = 6,
  kUInt32 = 7,
  kInt64 = 8,
  kUInt64 = 9,
};
inline constexpr int kNumDataTypes = 10;

// Reduction operators. avg: the sum divided by nranks; for integer types the sum is
// formed in 64-bit arithmetic and the quotient is truncated toward zero. band, bor, bxor:
// bitwise and, or, xor, defined for the integer types only.
enum class RedOp : uint8_t {
  kSum = 0,
  kProd = 1,
  kMin = 2,
  kMax = 3,
  kAvg = 4,
  kBand = 5,
  kBor = 6,
  kBxor = 7,
};
inline constexpr int kNumRedOps = 8;

enum class CollType : uint8_t {
  kAllReduce = 0,
  kReduceScatter = 1,
  kAllGather = 2,
};

size_t DataTypeSize(DataType dt);
bool IsFloatingPoint(DataType dt);
const char* DataTypeName(DataType dt);  // "float32", "bfloat16", ...
const char* RedOpName(RedOp op);        // "sum", ...
bool IsBitwise(RedOp op);               // band, bor, bxor
// bfloat16 or float16: a type float32 data may travel in (CommunicatorOptions::wire_dtype).
bool IsFloat32WireType(DataType dt);
const char* CollTypeName(CollType c);   // "allreduce", ...

// Accept the canonical names and common aliases ("float", "half", "bf16", "f32", "int", ...).
std::optional<DataType> ParseDataType(std::string_view name);
std::optional<RedOp> ParseRedOp(std::string_view name);

bool IsValidDataType(uint8_t v);
bool IsValidRedOp(uint8_t v);
bool IsValidCollType(uint8_t v);

// Whether `op` is defined for `dt`: every op for the integer types, all but the bitwise ones for
// the floating-point types. Both must be valid values.
bool IsRedOpDefinedFor(RedOp op, DataType dt);
// The sentence that refuses an op a type lacks, naming the fix.
std::string UndefinedRedOpMessage(RedOp op, DataType dt);

}  // namespace optcast
