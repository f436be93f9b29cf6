// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "server/memory_budget.h"

namespace optcast::server {

// Recycles chunk buffers so the steady state allocates nothing: a chunk slot's memory comes back
// to the pool when its last user (a pending send, a slot) lets go. Single-threaded.
class BufferPool {
 public:
  explicit BufferPool(size_t max_cached_bytes = 256u << 20);
  ~BufferPool();

  // A buffer of at least `bytes` bytes, 64-byte aligned. If `charged` is given, the caller has
  // charged CapacityFor(bytes) to it; the charge is released when the buffer is.
  std::shared_ptr<uint8_t> Get(size_t bytes, std::shared_ptr<MemoryBudget> charged = nullptr);
  // The bytes a buffer for `bytes` really occupies (sizes are rounded up to a class).
  static size_t CapacityFor(size_t bytes);

  // Frees every cached buffer (an idle server gives its memory back).
  void Trim();
  size_t cached_bytes() const;
  size_t outstanding_bytes() const;
  // How many shared_ptr control blocks were ever allocated (the rest were recycled).
  size_t control_blocks_allocated() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace optcast::server
