// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/copy_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <utility>

namespace optcast::client {

// ---- HugeMapping ----

HugeMapping::HugeMapping(uint64_t bytes) {
  if (bytes == 0) return;
  const uint64_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  // Over-map by one huge page so that an aligned run of whole huge pages fits inside.
  const uint64_t len = rounded + kHugePageBytes;
  void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    data_ = new uint8_t[bytes];
    size_ = bytes;
    return;
  }
  const auto base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (base + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  // Advice only: without transparent huge pages these are plain pages.
  (void)::madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);
  map_ = m;
  map_bytes_ = len;
  data_ = reinterpret_cast<uint8_t*>(aligned);
  size_ = rounded;
}

HugeMapping::~HugeMapping() { Free(); }

HugeMapping::HugeMapping(HugeMapping&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)) {}

HugeMapping& HugeMapping::operator=(HugeMapping&& o) noexcept {
  if (this != &o) {
    Free();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
  }
  return *this;
}

void HugeMapping::Free() {
  if (map_ != nullptr) {
    ::munmap(map_, map_bytes_);
  } else {
    delete[] data_;
  }
  data_ = nullptr;
  size_ = 0;
  map_ = nullptr;
  map_bytes_ = 0;
}

// ---- SmallCopySlabs ----

// Slots of power-of-two sizes from kMinSlotBytes to CopyBufferPool::kLargeBytes, each class
// carved out of its own 2 MiB slabs. Shared by the pool and its small buffers, so that a buffer
// that outlives the pool (a request never released) still has its memory.
class SmallCopySlabs {
 public:
  static constexpr uint64_t kMinSlotBytes = 4096;
  // A copy just under kLargeBytes takes a slot of kLargeBytes.
  static constexpr int kClasses = std::countr_zero(CopyBufferPool::kLargeBytes / kMinSlotBytes) + 1;

  static int ClassOf(uint64_t bytes) {
    const uint64_t slot = std::bit_ceil(std::max(bytes, kMinSlotBytes));
    return std::countr_zero(slot / kMinSlotBytes);
  }
  static uint64_t SlotBytes(int size_class) { return kMinSlotBytes << size_class; }

  uint8_t* Take(int size_class) {
    std::vector<uint8_t*>& free = free_[size_class];
    if (free.empty()) {
      slabs_.emplace_back(kHugePageBytes);
      const HugeMapping& slab = slabs_.back();
      const uint64_t slot = SlotBytes(size_class);
      // Handed out from the slab's start, so that its first huge page is the one touched first.
      for (uint64_t off = slab.size(); off >= slot; off -= slot) free.push_back(slab.data() + off - slot);
    }
    uint8_t* p = free.back();
    free.pop_back();
    return p;
  }
  void GiveBack(int size_class, uint8_t* p) { free_[size_class].push_back(p); }
  uint64_t slabs() const { return slabs_.size(); }

 private:
  std::vector<uint8_t*> free_[kClasses];
  std::vector<HugeMapping> slabs_;
};

// ---- CopyBuffer ----

CopyBuffer::~CopyBuffer() { Release(); }

CopyBuffer::CopyBuffer(CopyBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      large_(std::move(o.large_)),
      slabs_(std::move(o.slabs_)),
      size_class_(o.size_class_) {}

CopyBuffer& CopyBuffer::operator=(CopyBuffer&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    large_ = std::move(o.large_);
    slabs_ = std::move(o.slabs_);
    size_class_ = o.size_class_;
  }
  return *this;
}

void CopyBuffer::Release() {
  if (slabs_ != nullptr) {
    slabs_->GiveBack(size_class_, data_);
    slabs_.reset();
  }
  large_ = HugeMapping();
  data_ = nullptr;
  size_ = 0;
}

// ---- CopyBufferPool ----

CopyBufferPool::CopyBufferPool(size_t max_large_spares)
    : max_large_spares_(max_large_spares), slabs_(std::make_shared<SmallCopySlabs>()) {}

CopyBuffer CopyBufferPool::Take(uint64_t bytes) {
  CopyBuffer b;
  if (bytes == 0) return b;
  if (bytes < kLargeBytes) {
    b.size_class_ = SmallCopySlabs::ClassOf(bytes);
    b.data_ = slabs_->Take(b.size_class_);
    b.size_ = SmallCopySlabs::SlotBytes(b.size_class_);
    b.slabs_ = slabs_;
    return b;
  }
  size_t best = large_spares_.size();
  for (size_t i = 0; i < large_spares_.size(); ++i) {
    const uint64_t size = large_spares_[i].size();
    if (size >= bytes && (best == large_spares_.size() || size < large_spares_[best].size())) best = i;
  }
  if (best < large_spares_.size()) {
    b = std::move(large_spares_[best]);
    large_spares_.erase(large_spares_.begin() + static_cast<std::ptrdiff_t>(best));
    return b;
  }
  ++large_made_;
  b.large_ = HugeMapping(bytes);
  b.data_ = b.large_.data();
  b.size_ = b.large_.size();
  return b;
}

void CopyBufferPool::GiveBack(CopyBuffer&& b) {
  CopyBuffer given = std::move(b);
  if (given.empty() || given.small() || max_large_spares_ == 0) return;  // a slot goes back as `given` goes
  if (large_spares_.size() < max_large_spares_) {
    large_spares_.push_back(std::move(given));
    return;
  }
  auto smallest = std::min_element(large_spares_.begin(), large_spares_.end(),
                                   [](const CopyBuffer& x, const CopyBuffer& y) { return x.size() < y.size(); });
  if (smallest->size() < given.size()) *smallest = std::move(given);
}

uint64_t CopyBufferPool::mappings_made() const { return large_made_ + slabs_->slabs(); }

}  // namespace optcast::client
