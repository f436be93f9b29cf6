// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "optcast/types.h"

#include <algorithm>
#include <string>

namespace optcast {

size_t DataTypeSize(DataType dt) {
  switch (dt) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kFloat64: return 8;
    case DataType::kInt8: return 1;
    case DataType::kUInt8: return 1;
    case DataType::kInt32: return 4;
    case DataType::kUInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt64: return 8;
  }
  return 0;
}

bool IsFloatingPoint(DataType dt) {
  return dt == DataType::kFloat32 || dt == DataType::kFloat16 || dt == DataType::kBFloat16 || dt == DataType::kFloat64;
}

const char* DataTypeName(DataType dt) {
  switch (dt) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat64: return "float64";
    case DataType::kInt8: return "int8";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kUInt32: return "uint32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt64: return "uint64";
  }
  return "invalid-dtype";
}

const char* RedOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "sum";
    case RedOp::kProd: return "prod";
    case RedOp::kMin: return "min";
    case RedOp::kMax: return "max";
    case RedOp::kAvg: return "avg";
    case RedOp::kBand: return "band";
    case RedOp::kBor: return "bor";
    case RedOp::kBxor: return "bxor";
  }
  return "invalid-op";
}

bool IsBitwise(RedOp op) { return op == RedOp::kBand || op == RedOp::kBor || op == RedOp::kBxor; }

const char* CollTypeName(CollType c) {
  switch (c) {
    case CollType::kAllReduce: return "allreduce";
    case CollType::kReduceScatter: return "reducescatter";
    case CollType::kAllGather: return "allgather";
  }
  return "invalid-collective";
}

namespace {
std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}
}  // namespace

std::optional<DataType> ParseDataType(std::string_view name) {
  const std::string n = Lower(name);
  if (n == "float32" || n == "float" || n == "f32" || n == "fp32") return DataType::kFloat32;
  if (n == "float16" || n == "half" || n == "f16" || n == "fp16") return DataType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return DataType::kBFloat16;
  if (n == "float64" || n == "double" || n == "f64" || n == "fp64") return DataType::kFloat64;
  if (n == "int8" || n == "i8" || n == "char") return DataType::kInt8;
  if (n == "uint8" || n == "u8") return DataType::kUInt8;
  if (n == "int32" || n == "int" || n == "i32") return DataType::kInt32;
  if (n == "uint32" || n == "u32") return DataType::kUInt32;
  if (n == "int64" || n == "i64") return DataType::kInt64;
  if (n == "uint64" || n == "u64") return DataType::kUInt64;
  return std::nullopt;
}

std::optional<RedOp> ParseRedOp(std::string_view name) {
  const std::string n = Lower(name);
  if (n == "sum") return RedOp::kSum;
  if (n == "prod" || n == "product") return RedOp::kProd;
  if (n == "min") return RedOp::kMin;
  if (n == "max") return RedOp::kMax;
  if (n == "avg" || n == "mean") return RedOp::kAvg;
  if (n == "band" || n == "and") return RedOp::kBand;
  if (n == "bor" || n == "or") return RedOp::kBor;
  if (n == "bxor" || n == "xor") return RedOp::kBxor;
  return std::nullopt;
}

bool IsValidDataType(uint8_t v) { return v < kNumDataTypes; }
bool IsValidRedOp(uint8_t v) { return v < kNumRedOps; }
bool IsValidCollType(uint8_t v) { return v <= static_cast<uint8_t>(CollType::kAllGather); }

bool IsRedOpDefinedFor(RedOp op, DataType dt) { return !IsBitwise(op) || !IsFloatingPoint(dt); }

std::string UndefinedRedOpMessage(RedOp op, DataType dt) {
  return std::string(RedOpName(op)) + " is a bitwise op, defined for integer types only, not for " + DataTypeName(dt) +
         "; use an integer type of the same width (int8 ... uint64) to combine the bits";
}

bool IsFloat32WireType(DataType dt) { return dt == DataType::kBFloat16 || dt == DataType::kFloat16; }

}  // namespace optcast
