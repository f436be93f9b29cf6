// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/wire_narrowing.h"

#include <fmt/format.h>

#include <algorithm>

#include "reduce/wire_convert.h"

namespace optcast::client {

bool WireNarrowing::Applies(DataType wire, CollType coll, DataType dtype, RedOp op) {
  if (!IsFloat32WireType(wire) || dtype != DataType::kFloat32 || coll == CollType::kAllGather) return false;
  return op == RedOp::kSum || op == RedOp::kAvg || op == RedOp::kMin || op == RedOp::kMax;
}

Status WireNarrowing::CheckWireDtype(DataType wire) {
  if (wire == DataType::kFloat32 || IsFloat32WireType(wire)) return Status::Ok();
  return InvalidArgument(
      fmt::format("wire_dtype {} is not a wire type for float32; use bfloat16, float16, or float32 "
                  "(off)",
                  DataTypeName(wire)));
}

uint64_t WireNarrowing::StagingBytes(uint64_t send_elems, uint64_t recv_elems, bool in_place) {
  return (send_elems + (in_place ? 0 : recv_elems)) * sizeof(uint16_t);
}

WireNarrowing::WireNarrowing(DataType wire, const float* user_send, float* user_recv, uint64_t send_elems,
                             uint64_t recv_elems, bool in_place, uint64_t recv_offset, CopyBuffer staging)
    : wire_(wire),
      user_send_(user_send),
      user_recv_(user_recv),
      send_elems_(send_elems),
      recv_elems_(recv_elems),
      staging_(std::move(staging)),
      recv_staging_(staging_.data() + (in_place ? recv_offset : send_elems) * sizeof(uint16_t)),
      narrowed_((send_elems + kBlockElems - 1) / kBlockElems, false) {}

void WireNarrowing::NarrowForSend(uint64_t first, uint64_t n) {
  if (n == 0 || first >= send_elems_) return;
  const uint64_t last = std::min(first + n, send_elems_) - 1;
  auto* dst = reinterpret_cast<uint16_t*>(staging_.data());
  for (uint64_t b = first / kBlockElems; b <= last / kBlockElems; ++b) {
    if (narrowed_[b]) continue;
    narrowed_[b] = true;
    const uint64_t begin = b * kBlockElems;
    const uint64_t len = std::min(kBlockElems, send_elems_ - begin);
    // The wire type was checked when the request was made (Applies).
    (void)reduce::NarrowFloat32(wire_, user_send_ + begin, dst + begin, len);
  }
}

void WireNarrowing::WidenResult(uint64_t first, uint64_t n) {
  if (first >= recv_elems_) return;
  n = std::min(n, recv_elems_ - first);
  (void)reduce::WidenToFloat32(wire_, reinterpret_cast<const uint16_t*>(recv_staging_) + first, user_recv_ + first, n);
}

}  // namespace optcast::client
