// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/buffer_pool.h"

#include <bit>
#include <cstdlib>
#include <new>

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
  // The shared_ptr control blocks: all of one type, so one size; recycled like the buffers.
  std::vector<void*> free_blocks;
  size_t block_bytes = 0;
  size_t blocks_allocated = 0;

  ~State() {
    for (auto& l : free_lists)
      for (uint8_t* p : l) std::free(p);
    for (void* b : free_blocks) ::operator delete(b);
  }
};

namespace {

// Allocator for the control blocks of the pool's shared_ptrs, so that handing out a buffer
// allocates nothing once the pool is warm. The copy inside a control block keeps the state alive
// until the block itself is given back.
template <typename T>
struct BlockAllocator {
  using value_type = T;
  std::shared_ptr<BufferPool::State> state;

  explicit BlockAllocator(std::shared_ptr<BufferPool::State> s) : state(std::move(s)) {}
  template <typename U>
  BlockAllocator(const BlockAllocator<U>& other) : state(other.state) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (n == 1 && bytes == state->block_bytes && !state->free_blocks.empty()) {
      void* b = state->free_blocks.back();
      state->free_blocks.pop_back();
      return static_cast<T*>(b);
    }
    ++state->blocks_allocated;
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (n == 1 && (state->block_bytes == 0 || state->block_bytes == bytes) && state->alive) {
      state->block_bytes = bytes;
      state->free_blocks.push_back(p);
      return;
    }
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const BlockAllocator<U>& other) const {
    return state == other.state;
  }
};

}  // namespace

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
  return std::shared_ptr<uint8_t>(
      p,
      [st = state_, cls, cap, charged = std::move(charged)](uint8_t* q) {
        st->outstanding -= cap;
        if (charged) charged->Release(cap);
        if (st->alive && st->cached + cap <= st->max_cached) {
          st->free_lists[cls].push_back(q);
          st->cached += cap;
        } else {
          std::free(q);
        }
      },
      BlockAllocator<uint8_t>(state_));
}

void BufferPool::Trim() {
  for (auto& l : state_->free_lists) {
    for (uint8_t* p : l) std::free(p);
    l.clear();
  }
  state_->cached = 0;
}

size_t BufferPool::control_blocks_allocated() const { return state_->blocks_allocated; }

size_t BufferPool::cached_bytes() const { return state_->cached; }
size_t BufferPool::outstanding_bytes() const { return state_->outstanding; }

}  // namespace optcast::server
