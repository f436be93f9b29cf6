// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Memory for the copies that failover keeps of a rank's collectives (docs/reliability.md).
//
// A copy is written while results land, so its memory must cost no more than the copy itself.
// A fresh 4 KiB page costs a fault on first touch, and on a virtual machine that is several
// microseconds: a fresh 8 MiB buffer took 30-40 ms to fill here, against 1.7 ms for one already
// touched, and every size a job had not used before paid it for each of the copies it keeps.
// So copy memory is huge-page backed where the kernel allows (one fault per 2 MiB: 0.8 ms for
// 8 MiB) and reused:
// - a large copy (kLargeBytes and up) gets its own mapping, rounded up to whole huge pages, and
//   goes back to a bounded list of spares (best fit; when full, the smallest goes);
// - a small one is a slot of a power-of-two size class, carved out of 2 MiB slabs that are kept
//   for the pool's life, so a job's first collectives of a new size touch no fresh page.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace optcast::client {

inline constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;

// Huge-page-aligned anonymous memory, rounded up to whole huge pages; heap memory where mapping
// fails. Never zeroed here: copies write before they read.
class HugeMapping {
 public:
  HugeMapping() = default;
  explicit HugeMapping(uint64_t bytes);
  ~HugeMapping();
  HugeMapping(HugeMapping&& o) noexcept;
  HugeMapping& operator=(HugeMapping&& o) noexcept;
  HugeMapping(const HugeMapping&) = delete;
  HugeMapping& operator=(const HugeMapping&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  void Free();
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;  // the whole mapping (over-mapped for alignment), or null: heap memory
  uint64_t map_bytes_ = 0;
};

class SmallCopySlabs;

// One copy's memory. Move-only; a small one returns its slot when it goes.
class CopyBuffer {
 public:
  CopyBuffer() = default;
  ~CopyBuffer();
  CopyBuffer(CopyBuffer&& o) noexcept;
  CopyBuffer& operator=(CopyBuffer&& o) noexcept;
  CopyBuffer(const CopyBuffer&) = delete;
  CopyBuffer& operator=(const CopyBuffer&) = delete;

  uint8_t* data() const { return data_; }
  // What may be used: at least what was asked for.
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool small() const { return slabs_ != nullptr; }

 private:
  friend class CopyBufferPool;
  void Release();

  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  HugeMapping large_;                      // a large copy's own memory
  std::shared_ptr<SmallCopySlabs> slabs_;  // a small copy's slot comes from (and goes back to) here
  int size_class_ = 0;
};

class CopyBufferPool {
 public:
  // Copies from this size up get their own mapping; smaller ones a slab slot.
  static constexpr uint64_t kLargeBytes = uint64_t{1} << 20;

  explicit CopyBufferPool(size_t max_large_spares);

  // A buffer of at least `bytes` bytes.
  CopyBuffer Take(uint64_t bytes);
  // Keeps a large buffer for a later copy (a small one goes back to its slab either way).
  void GiveBack(CopyBuffer&& b);

  size_t large_spares() const { return large_spares_.size(); }
  // Memory made (not reused): large mappings and small slabs.
  uint64_t mappings_made() const;

 private:
  size_t max_large_spares_;
  std::vector<CopyBuffer> large_spares_;
  std::shared_ptr<SmallCopySlabs> slabs_;
  uint64_t large_made_ = 0;
};

}  // namespace optcast::client
