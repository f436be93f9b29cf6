// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/tree_math.h"

#include <fmt/format.h>

#include <cstring>

#include "reduce/combine.h"
#include "reduce/half_inline.h"

namespace optcast::server {
namespace {

bool IsSigned(DataType dt) { return dt == DataType::kInt8 || dt == DataType::kInt32 || dt == DataType::kInt64; }

// Widens `count` elements of `dtype` into the partial type `pt`.
void Widen(DataType dtype, DataType pt, const void* src, void* dst, size_t count) {
  if (pt == dtype) {
    std::memcpy(dst, src, count * DataTypeSize(dtype));
    return;
  }
  if (pt == DataType::kFloat32) {
    const auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    if (dtype == DataType::kFloat16) {
      for (size_t i = 0; i < count; ++i) d[i] = reduce::detail::HalfBitsToFloat(s[i]);
    } else {
      for (size_t i = 0; i < count; ++i) d[i] = reduce::detail::BFloat16BitsToFloat(s[i]);
    }
    return;
  }
  // 64-bit integers: sign- or zero-extend.
  auto* d = static_cast<uint64_t*>(dst);
  switch (dtype) {
    case DataType::kInt8:
      for (size_t i = 0; i < count; ++i) d[i] = static_cast<uint64_t>(static_cast<const int8_t*>(src)[i]);
      break;
    case DataType::kUInt8:
      for (size_t i = 0; i < count; ++i) d[i] = static_cast<const uint8_t*>(src)[i];
      break;
    case DataType::kInt32:
      for (size_t i = 0; i < count; ++i) d[i] = static_cast<uint64_t>(static_cast<const int32_t*>(src)[i]);
      break;
    case DataType::kUInt32:
      for (size_t i = 0; i < count; ++i) d[i] = static_cast<const uint32_t*>(src)[i];
      break;
    default: break;  // 64-bit types are their own partial type
  }
}

template <typename T>
void NarrowInts(const uint64_t* s, void* dst, size_t count) {
  auto* d = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) d[i] = static_cast<T>(s[i]);  // modular, forward in place
}

}  // namespace

DataType PartialType(DataType dtype, RedOp op) {
  if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) return DataType::kFloat32;
  if (op == RedOp::kAvg && !IsFloatingPoint(dtype)) return IsSigned(dtype) ? DataType::kInt64 : DataType::kUInt64;
  return dtype;
}

RedOp PartialOp(RedOp op) { return op == RedOp::kAvg ? RedOp::kSum : op; }

Status CombineToPartial(DataType dtype, RedOp op, const void* const* srcs, const bool* is_partial, int n, void* dst,
                        size_t count, std::vector<uint8_t>* scratch) {
  if (n < 1) return InvalidArgument("a tree node combines at least one contribution");
  const DataType pt = PartialType(dtype, op);
  const size_t psize = DataTypeSize(pt);
  int to_widen = 0;
  for (int i = 0; i < n; ++i) to_widen += (is_partial[i] || pt == dtype) ? 0 : 1;
  scratch->resize(static_cast<size_t>(to_widen) * count * psize);
  std::vector<const void*> wide(static_cast<size_t>(n));
  size_t next = 0;
  for (int i = 0; i < n; ++i) {
    if (is_partial[i] || pt == dtype) {
      wide[i] = srcs[i];
      continue;
    }
    void* w = scratch->data() + next * count * psize;
    ++next;
    Widen(dtype, pt, srcs[i], w, count);
    wide[i] = w;
  }
  // The partial type of an integer avg is a 64-bit integer whose sum wraps, like combine's.
  return reduce::Combine(pt, PartialOp(op), wide.data(), n, dst, count);
}

Status FinishPartial(DataType dtype, RedOp op, void* buf, size_t count, uint32_t nranks) {
  const DataType pt = PartialType(dtype, op);
  if (op == RedOp::kAvg) {
    OPTCAST_RETURN_IF_ERROR(reduce::FinishAverage(pt, buf, count, static_cast<int>(nranks)));
  }
  if (pt == dtype) return Status::Ok();
  if (pt == DataType::kFloat32) {
    const auto* s = static_cast<const float*>(buf);
    auto* d = static_cast<uint16_t*>(buf);
    // In place and forward: element i is read (bytes 4i..4i+3) before it is written (2i, 2i+1).
    for (size_t i = 0; i < count; ++i) {
      const float v = s[i];
      d[i] = dtype == DataType::kFloat16 ? reduce::detail::FloatToHalfBits(v) : reduce::detail::FloatToBFloat16Bits(v);
    }
    return Status::Ok();
  }
  const auto* s = static_cast<const uint64_t*>(buf);
  switch (dtype) {
    case DataType::kInt8: NarrowInts<int8_t>(s, buf, count); break;
    case DataType::kUInt8: NarrowInts<uint8_t>(s, buf, count); break;
    case DataType::kInt32: NarrowInts<int32_t>(s, buf, count); break;
    case DataType::kUInt32: NarrowInts<uint32_t>(s, buf, count); break;
    default: return InternalError(fmt::format("no partial narrowing for {}", DataTypeName(dtype)));
  }
  return Status::Ok();
}

}  // namespace optcast::server
