// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/buffer_pool.h"

#include <bit>
#include <cstdlib>

namespace optcast::server {

namespace {
constexpr int kMinClassLog2 = 12;  // 4 KiB
constexpr int kClasses = 40;

int ClassOf(size_t bytes) {
  size_t rounded = std::max<size_t>(bytes, size_t{1} << kMinClassLog2);
  return std::bit_width(rounded - 1);
}
}  // namespace

struct BufferPool::State {
  size_t max_cached;
  size_t cached = 0;
  size_t outstanding = 0;
  bool alive = true;
  std::vector<uint8_t*> free_lists[kClasses];

  ~State() {
    for (auto& l : free_lists)
      for (uint8_t* p : l) std::free(p);
  }
};

BufferPool::BufferPool(size_t max_cached_bytes) : state_(std::make_shared<State>()) {
  state_->max_cached = max_cached_bytes;
}

BufferPool::~BufferPool() { state_->alive = false; }

size_t BufferPool::CapacityFor(size_t bytes) { return size_t{1} << ClassOf(bytes); }

std::shared_ptr<uint8_t> BufferPool::Get(size_t bytes, std::shared_ptr<MemoryBudget> charged) {
  const int cls = ClassOf(bytes);
  const size_t cap = size_t{1} << cls;
  uint8_t* p = nullptr;
  auto& fl = state_->free_lists[cls];
  if (!fl.empty()) {
    p = fl.back();
    fl.pop_back();
    state_->cached -= cap;
  } else {
    p = static_cast<uint8_t*>(std::aligned_alloc(64, cap));
    if (p == nullptr) {
      if (charged) charged->Release(cap);
      return nullptr;
    }
  }
  state_->outstanding += cap;
  // The deleter holds the state so buffers may outlive the pool object itself.
  return std::shared_ptr<uint8_t>(p, [st = state_, cls, cap, charged = std::move(charged)](uint8_t* q) {
    st->outstanding -= cap;
    if (charged) charged->Release(cap);
    if (st->alive && st->cached + cap <= st->max_cached) {
      st->free_lists[cls].push_back(q);
      st->cached += cap;
    } else {
      std::free(q);
    }
  });
}

void BufferPool::Trim() {
  for (auto& l : state_->free_lists) {
    for (uint8_t* p : l) std::free(p);
    l.clear();
  }
  state_->cached = 0;
}

size_t BufferPool::cached_bytes() const { return state_->cached; }
size_t BufferPool::outstanding_bytes() const { return state_->outstanding; }

}  // namespace optcast::server
