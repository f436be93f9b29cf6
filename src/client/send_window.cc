// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/send_window.h"

#include <algorithm>

namespace optcast::client {

int SteadyWindowChunks(int nranks, int nservers) {
  const int per_server = (std::max(nranks, 1) + std::max(nservers, 1) - 1) / std::max(nservers, 1);
  return std::clamp(2 * per_server + 2, kMinWindowChunks, kMaxWindowChunks);
}

bool SendWindow::HasRoom(uint64_t bytes) const {
  if (fixed_chunks_ > 0) return inflight_ < fixed_chunks_;
  if (inflight_ >= limit_) return false;
  if (inflight_ < kMinWindowChunks) return true;
  return inflight_bytes_ + bytes <= kWindowBytes;
}

void SendWindow::OnSent(uint64_t bytes) {
  ++inflight_;
  inflight_bytes_ += bytes;
}

void SendWindow::OnReturned(uint64_t bytes) {
  if (inflight_ > 0) --inflight_;
  inflight_bytes_ -= std::min(inflight_bytes_, bytes);
  if (inflight_ == 0) {
    // Idle: the next burst starts from the ranks' common step again.
    limit_ = kInitialWindowChunks;
    returned_at_limit_ = 0;
    return;
  }
  if (++returned_at_limit_ >= limit_ && limit_ < max_chunks_) {
    ++limit_;
    returned_at_limit_ = 0;
  }
}

}  // namespace optcast::client
