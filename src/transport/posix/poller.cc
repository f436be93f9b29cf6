// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/posix/poller.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace optcast::transport {

Poller::Poller() : epfd_(epoll_create1(EPOLL_CLOEXEC)) {}
Poller::~Poller() {
  if (epfd_ >= 0) close(epfd_);
}

static uint32_t Mask(bool want_read, bool want_write) {
  return (want_read ? EPOLLIN | EPOLLRDHUP : 0u) | (want_write ? EPOLLOUT : 0u);
}

Status Poller::Add(int fd, void* tag, bool want_read, bool want_write) {
  epoll_event ev{};
  ev.events = Mask(want_read, want_write);
  ev.data.ptr = tag;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return InternalError(std::string("epoll_ctl(ADD): ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status Poller::Modify(int fd, void* tag, bool want_read, bool want_write) {
  epoll_event ev{};
  ev.events = Mask(want_read, want_write);
  ev.data.ptr = tag;
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) != 0) {
    return InternalError(std::string("epoll_ctl(MOD): ") + std::strerror(errno));
  }
  return Status::Ok();
}

void Poller::Remove(int fd) { epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr); }

Status Poller::Wait(int timeout_ms, std::vector<Event>* events) {
  epoll_event evs[128];
  events->clear();
  int n = epoll_wait(epfd_, evs, 128, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return Status::Ok();
    return InternalError(std::string("epoll_wait: ") + std::strerror(errno));
  }
  for (int i = 0; i < n; ++i) {
    const uint32_t e = evs[i].events;
    events->push_back({evs[i].data.ptr, (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0,
                       (e & EPOLLOUT) != 0, (e & (EPOLLHUP | EPOLLERR)) != 0});
  }
  return Status::Ok();
}

Waker::Waker() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
Waker::~Waker() {
  if (fd_ >= 0) close(fd_);
}
void Waker::Wake() {
  uint64_t one = 1;
  ssize_t r = write(fd_, &one, sizeof(one));
  (void)r;
}
void Waker::Drain() {
  uint64_t v;
  ssize_t r = read(fd_, &v, sizeof(v));
  (void)r;
}

}  // namespace optcast::transport
