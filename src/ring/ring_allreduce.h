// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "optcast/status.h"
#include "optcast/types.h"
#include "transport/posix/socket.h"

namespace optcast::ring {

// Ring AllReduce over TCP between the ranks themselves: reduce-scatter then all-gather, n-1 steps
// each, every rank sending 2(n-1)/n of the buffer. The baseline the reduction servers are
// measured against. Each step is pipelined: received pieces are reduced while later pieces are
// still arriving.
class RingAllReduce {
 public:
  // Listens on `listen_host` (any port), swaps addresses through `rv`, links to both neighbours.
  static Status Create(bootstrap::Rendezvous& rv, const std::string& listen_host, std::chrono::milliseconds timeout,
                       std::unique_ptr<RingAllReduce>* out);

  // sendbuf == recvbuf is allowed. Every rank gets bitwise-identical results.
  Status AllReduce(const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op);

 private:
  RingAllReduce(int rank, int nranks, std::chrono::milliseconds timeout)
      : rank_(rank), nranks_(nranks), timeout_(timeout) {}

  // Sends `send_len` bytes to the right neighbour while receiving `recv_len` from the left one;
  // `on_piece(offset, len)` runs for each received piece of `piece_bytes` (the last may be short).
  template <typename OnPiece>
  Status Exchange(const uint8_t* send, size_t send_len, uint8_t* recv, size_t recv_len, size_t piece_bytes,
                  OnPiece on_piece);

  int rank_;
  int nranks_;
  std::chrono::milliseconds timeout_;
  transport::posix::Socket right_;
  transport::posix::Socket left_;
  std::vector<uint8_t> scratch_;
};

}  // namespace optcast::ring
