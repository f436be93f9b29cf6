// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace optcast::server {

// Bytes a job (or the whole server) may hold. A job's budget has the server's as parent, so one
// charge is checked against both. Thread-safe: buffers may be released on any thread.
class MemoryBudget {
 public:
  // `name` says which limit this is in errors, e.g. "--job-memory-limit".
  MemoryBudget(std::string name, uint64_t limit, std::shared_ptr<MemoryBudget> parent = nullptr);

  // Charges `bytes` here and in every parent. If any limit would be exceeded nothing is charged,
  // false is returned and *refused (if given) points at the budget whose limit it is.
  bool TryCharge(uint64_t bytes, const MemoryBudget** refused = nullptr);
  void Release(uint64_t bytes);

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  const std::string& name() const { return name_; }

 private:
  const std::string name_;
  const uint64_t limit_;
  const std::shared_ptr<MemoryBudget> parent_;
  std::atomic<uint64_t> used_{0};
};

// Half of the machine's physical memory: the server's default memory limit.
uint64_t DefaultServerMemoryLimit();

}  // namespace optcast::server
