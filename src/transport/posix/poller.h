// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <vector>

#include "optcast/status.h"

namespace optcast::transport {

// The event loop's pieces. Every Connection and Listener offers an fd() for them to wait on, so
// they are named with the contract (transport::Poller), unlike the sockets (transport::posix).

// A thin epoll wrapper: level-triggered readiness for many descriptors.
class Poller {
 public:
  struct Event {
    void* tag;
    bool readable;
    bool writable;
    bool hangup;
  };

  Poller();
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  Status Add(int fd, void* tag, bool want_read, bool want_write);
  Status Modify(int fd, void* tag, bool want_read, bool want_write);
  void Remove(int fd);
  // Waits up to timeout_ms (-1: forever) and fills `events`.
  Status Wait(int timeout_ms, std::vector<Event>* events);

 private:
  int epfd_;
};

// An eventfd that wakes a Poller from another thread.
class Waker {
 public:
  Waker();
  ~Waker();
  Waker(const Waker&) = delete;  // one owner closes the eventfd
  Waker& operator=(const Waker&) = delete;
  // Negative when the eventfd could not be made.
  int fd() const { return fd_; }
  void Wake();
  void Drain();

 private:
  int fd_;
};

}  // namespace optcast::transport
