// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <cstddef>

#include "common/env.h"
#include "optcast/status.h"
#include "transport/endpoint.h"

namespace optcast::transport::posix {

// Sockets and the blocking helpers every transport and the bootstrap share: the tcp transport's
// streams, the ofi transport's control connections, the ring baseline and the rendezvous.

// Owns a file descriptor; closes it on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { Close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void Close();

 private:
  int fd_ = -1;
};

// Binds and listens. Port 0 picks a free port; LocalPort() tells which.
Status Listen(const Endpoint& ep, Socket* out, int backlog = 1024);
Status LocalPort(const Socket& s, uint16_t* port);

// Connects, retrying refused/unreachable attempts until `deadline`; the error names the address.
Status Connect(const Endpoint& ep, Deadline deadline, Socket* out);

// Starts a non-blocking connect and returns at once: the socket becomes writable once the
// connection is up, and a refused or unreachable peer shows up as SO_ERROR (or as the error of the
// first send or receive). For event loops that must never wait. A host name is looked up here,
// which can block: callers that must never wait pass a numeric address (see ResolveNumeric).
Status StartConnect(const Endpoint& ep, Socket* out);
// Finishes what StartConnect began, without waiting: *connected tells whether the connection is
// up; an error names the address and the reason (refused, unreachable, ...).
Status CheckConnect(int fd, const std::string& peer, bool* connected);
// Looks `ep` up (this can block for seconds) and returns it with a numeric host, the first
// address it resolves to, so that later connects need no lookup.
Status ResolveNumeric(const Endpoint& ep, Endpoint* out);

// Accepts one pending connection (listening socket may be non-blocking: returns Unavailable when
// none is pending).
Status Accept(const Socket& listener, Socket* out, std::string* peer = nullptr);

// Tunes a data socket: TCP_NODELAY and keep-alive (buffer sizes stay auto-tuned), non-blocking
// when asked.
Status ConfigureDataSocket(int fd, bool nonblocking);
Status SetNonBlocking(int fd, bool on);

// Blocking helpers with a deadline, for bootstrap and handshakes (poll + non-blocking I/O).
Status SendAll(int fd, const void* data, size_t len, Deadline deadline);
Status RecvAll(int fd, void* data, size_t len, Deadline deadline);

}  // namespace optcast::transport::posix
