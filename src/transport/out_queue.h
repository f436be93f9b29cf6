// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <vector>

#include "transport/message.h"

namespace optcast::transport {

// The send queue of a connection: a FIFO that reuses its storage, so a steady stream of
// messages allocates nothing once it has grown to the deepest queue seen (std::deque allocates
// and frees a block every few messages).
class OutQueue {
 public:
  using iterator = std::vector<OutMessage>::iterator;

  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  OutMessage& front() { return items_[head_]; }
  iterator begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  iterator end() { return items_.end(); }

  void push_back(OutMessage m) { items_.push_back(std::move(m)); }

  void pop_front() {
    items_[head_] = OutMessage();  // lets go of the payload's keepalive now
    ++head_;
    if (head_ == items_.size()) {
      clear();
    } else if (head_ >= kCompactAfter && 2 * head_ >= items_.size()) {
      // A queue that never drains: move the live part down (no allocation).
      items_.erase(items_.begin(), begin());
      head_ = 0;
    }
  }

  void clear() {
    items_.clear();  // keeps the capacity
    head_ = 0;
  }

 private:
  static constexpr size_t kCompactAfter = 64;
  std::vector<OutMessage> items_;
  size_t head_ = 0;
};

}  // namespace optcast::transport
