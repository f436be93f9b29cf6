// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/memory_budget.h"

#include <unistd.h>

namespace optcast::server {

MemoryBudget::MemoryBudget(std::string name, uint64_t limit, std::shared_ptr<MemoryBudget> parent)
    : name_(std::move(name)), limit_(limit), parent_(std::move(parent)) {}

bool MemoryBudget::TryCharge(uint64_t bytes, const MemoryBudget** refused) {
  const uint64_t before = used_.fetch_add(bytes, std::memory_order_relaxed);
  if (before + bytes > limit_ || before + bytes < before) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    if (refused != nullptr) *refused = this;
    return false;
  }
  if (parent_ && !parent_->TryCharge(bytes, refused)) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void MemoryBudget::Release(uint64_t bytes) {
  used_.fetch_sub(bytes, std::memory_order_relaxed);
  if (parent_) parent_->Release(bytes);
}

uint64_t DefaultServerMemoryLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return uint64_t{4} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}

}  // namespace optcast::server
