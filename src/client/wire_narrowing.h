// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// float32 collectives on a 16-bit wire (CommunicatorOptions::wire_dtype, docs/wire-dtype.md).
//
// The request is issued as a collective of the wire type over a staging buffer, so everything
// below it (striping, windows, failover's copies and re-runs, the servers, trees) sees an ordinary
// bfloat16 or float16 collective: the servers widen to float32, combine in rank order and round
// once. This rank's part is at both ends:
// - its input is rounded into the staging buffer just before each chunk's first send, a block at
//   a time, so the conversion runs beside the sends and the chunk is still in cache when the
//   transport copies it;
// - each result is widened into the caller's float32 buffer as it lands.
// The staging buffer keeps the caller's layout: in place when the caller's buffers are.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "client/copy_buffer.h"
#include "optcast/status.h"
#include "optcast/types.h"

namespace optcast::client {

class WireNarrowing {
 public:
  // Whether a collective of float32 `dtype` goes over `wire`: allreduce and reduce-scatter with
  // sum, avg, min or max. All-gather (no arithmetic to gain precision in), prod, and every other
  // element type travel as they are.
  static bool Applies(DataType wire, CollType coll, DataType dtype, RedOp op);

  // OK for a wire type or kFloat32 (off); else InvalidArgument naming the choices.
  static Status CheckWireDtype(DataType wire);

  // Bytes of staging a collective needs: its send elements, and its receive elements unless the
  // receive buffer lies inside the send buffer (in place).
  static uint64_t StagingBytes(uint64_t send_elems, uint64_t recv_elems, bool in_place);

  // `recv_offset`: where the caller's receive buffer starts in its send buffer, in elements, when
  // in place. `staging` holds StagingBytes.
  WireNarrowing(DataType wire, const float* user_send, float* user_recv, uint64_t send_elems, uint64_t recv_elems,
                bool in_place, uint64_t recv_offset, CopyBuffer staging);

  DataType wire() const { return wire_; }
  const uint8_t* send_staging() const { return staging_.data(); }
  uint8_t* recv_staging() const { return recv_staging_; }

  // Rounds the caller's input [first, first + n) (and the rest of the blocks it touches) into the
  // staging buffer, unless done already. Before any chunk of it is sent.
  void NarrowForSend(uint64_t first, uint64_t n);
  // A result [first, first + n) of the receive side landed in the staging buffer: into the
  // caller's buffer with it.
  void WidenResult(uint64_t first, uint64_t n);

  // The staging memory, for the pool it came from, once the request is released.
  CopyBuffer TakeStaging() { return std::move(staging_); }

  // Elements rounded at a time: large enough that the bookkeeping costs nothing, small enough that
  // a block is in cache when its chunks are sent.
  static constexpr uint64_t kBlockElems = 16 * 1024;

 private:
  DataType wire_;
  const float* user_send_;
  float* user_recv_;
  uint64_t send_elems_;
  uint64_t recv_elems_;
  CopyBuffer staging_;
  uint8_t* recv_staging_;
  std::vector<bool> narrowed_;  // per block of the send side
};

}  // namespace optcast::client
