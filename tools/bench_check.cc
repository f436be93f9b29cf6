// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/bench_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "reduce/half.h"

namespace optcast::tools {

namespace {

// Small integers: exact in float16/bfloat16 too. prod uses +-1 so products never grow.
int64_t InputValue(DataType dtype, RedOp op, int rank, size_t i) {
  const bool is_unsigned = dtype == DataType::kUInt8 || dtype == DataType::kUInt32 || dtype == DataType::kUInt64;
  const uint64_t h = static_cast<uint64_t>(rank) * 7 + i * 3;
  if (op == RedOp::kProd) return is_unsigned ? 1 + static_cast<int64_t>(h % 2) : (h % 2 ? -1 : 1);
  // Bitwise ops (integer types): every rank sets (bor) or clears (band) one bit of the element's
  // width, so the result shows whether every rank's bit arrived; bxor mixes all the bits.
  const uint64_t bit = uint64_t{1} << (h % (8 * DataTypeSize(dtype)));
  if (op == RedOp::kBand) return static_cast<int64_t>(~bit);
  if (op == RedOp::kBor) return static_cast<int64_t>(bit);
  if (op == RedOp::kBxor) return static_cast<int64_t>((h + 1) * 0x9e3779b97f4a7c15ull);
  return is_unsigned ? static_cast<int64_t>(h % 11) : static_cast<int64_t>(h % 11) - 5;
}

void Store(DataType dt, void* buf, size_t i, int64_t v) {
  switch (dt) {
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = static_cast<double>(v); break;
    case DataType::kFloat16: static_cast<uint16_t*>(buf)[i] = reduce::FloatToHalf(static_cast<float>(v)); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(buf)[i] = reduce::FloatToBFloat16(static_cast<float>(v)); break;
    case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case DataType::kUInt8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case DataType::kUInt32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = v; break;
    case DataType::kUInt64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
  }
}

double LoadFloat(DataType dt, const void* buf, size_t i) {
  switch (dt) {
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
    case DataType::kFloat16: return reduce::HalfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBFloat16: return reduce::BFloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    default: return 0;
  }
}

// The integer result wrapped to the element type, as bits of width `bytes`.
uint64_t Wrap(int64_t v, size_t bytes) {
  if (bytes == 8) return static_cast<uint64_t>(v);
  return static_cast<uint64_t>(v) & ((uint64_t{1} << (8 * bytes)) - 1);
}

uint64_t LoadBits(const void* buf, size_t i, size_t bytes) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const uint8_t*>(buf) + i * bytes, bytes);
  return v;
}

}  // namespace

void FillBenchInput(DataType dtype, RedOp op, int rank, void* buf, size_t count) {
  for (size_t i = 0; i < count; ++i) Store(dtype, buf, i, InputValue(dtype, op, rank, i));
}

double WireErrorBound(DataType wire, int nranks) {
  const double u = std::ldexp(1.0, wire == DataType::kBFloat16 ? -8 : -11);
  return 2 * u + 4 * u * u + nranks * std::ldexp(1.0, -23);
}

uint64_t CountWrong(DataType dtype, RedOp op, int nranks, const void* result, size_t count, DataType wire) {
  uint64_t wrong = 0;
  const size_t esize = DataTypeSize(dtype);
  const bool on_wire = dtype == DataType::kFloat32 && (wire == DataType::kBFloat16 || wire == DataType::kFloat16) &&
                       (op == RedOp::kSum || op == RedOp::kAvg || op == RedOp::kMin || op == RedOp::kMax);
  const double wire_bound = on_wire ? WireErrorBound(wire, nranks) : 0.0;
  for (size_t i = 0; i < count; ++i) {
    int64_t acc = InputValue(dtype, op, 0, i);
    double magnitude = std::fabs(static_cast<double>(acc));
    for (int r = 1; r < nranks; ++r) {
      const int64_t v = InputValue(dtype, op, r, i);
      magnitude += std::fabs(static_cast<double>(v));
      switch (op) {
        case RedOp::kSum:
        case RedOp::kAvg: acc += v; break;
        case RedOp::kProd: acc *= v; break;
        case RedOp::kMin: acc = std::min(acc, v); break;
        case RedOp::kMax: acc = std::max(acc, v); break;
        case RedOp::kBand: acc &= v; break;
        case RedOp::kBor: acc |= v; break;
        case RedOp::kBxor: acc ^= v; break;
      }
    }
    if (IsFloatingPoint(dtype)) {
      double expect = static_cast<double>(acc);
      if (op == RedOp::kAvg) expect /= nranks;
      const double got = LoadFloat(dtype, result, i);
      double tol = op == RedOp::kAvg ? std::fabs(expect) * (esize == 2 ? 1e-2 : 1e-6) : 0.0;
      if (on_wire) tol = std::max(tol, wire_bound * magnitude / (op == RedOp::kAvg ? nranks : 1));
      if (!(std::fabs(got - expect) <= tol)) ++wrong;
    } else {
      if (op == RedOp::kAvg) acc /= nranks;  // C++ division truncates toward zero
      if (LoadBits(result, i, esize) != Wrap(acc, esize)) ++wrong;
    }
  }
  return wrong;
}

}  // namespace optcast::tools
