// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/posix/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace optcast::transport::posix {

namespace {

std::string ErrnoText(int err) { return std::string(std::strerror(err)); }

Status Resolve(const Endpoint& ep, bool passive, addrinfo** result) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string port = std::to_string(ep.port);
  int rc = getaddrinfo(ep.host.c_str(), port.c_str(), &hints, result);
  if (rc != 0) {
    return UnavailableError("cannot resolve '" + ep.ToString() + "': " + gai_strerror(rc) + "; check the host name");
  }
  return Status::Ok();
}

}  // namespace

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    Close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

Status SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return InternalError("fcntl(F_GETFL): " + ErrnoText(errno));
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) < 0) return InternalError("fcntl(F_SETFL): " + ErrnoText(errno));
  return Status::Ok();
}

Status ConfigureDataSocket(int fd, bool nonblocking) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  return SetNonBlocking(fd, nonblocking);
}

Status Listen(const Endpoint& ep, Socket* out, int backlog) {
  addrinfo* res = nullptr;
  OPTCAST_RETURN_IF_ERROR(Resolve(ep, true, &res));
  Status last = UnavailableError("no usable address for " + ep.ToString());
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!s.valid()) {
      last = UnavailableError("socket(): " + ErrnoText(errno));
      continue;
    }
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last = UnavailableError("cannot listen on " + ep.ToString() + ": bind: " + ErrnoText(errno) +
                              (errno == EADDRINUSE ? "; pick another port or stop the process using it" : ""));
      continue;
    }
    if (::listen(s.fd(), backlog) != 0) {
      last = UnavailableError("cannot listen on " + ep.ToString() + ": " + ErrnoText(errno));
      continue;
    }
    freeaddrinfo(res);
    *out = std::move(s);
    return Status::Ok();
  }
  freeaddrinfo(res);
  return last;
}

Status LocalPort(const Socket& s, uint16_t* port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return InternalError("getsockname: " + ErrnoText(errno));
  }
  if (ss.ss_family == AF_INET) {
    *port = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  } else {
    *port = ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  return Status::Ok();
}

Status Connect(const Endpoint& ep, Deadline deadline, Socket* out) {
  std::string last_error = "no attempt made";
  auto backoff = std::chrono::milliseconds(10);
  int attempts = 0;
  do {
    ++attempts;
    addrinfo* res = nullptr;
    Status st = Resolve(ep, false, &res);
    if (!st.ok()) {
      last_error = st.message();
    } else {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
        if (!s.valid()) {
          last_error = "socket(): " + ErrnoText(errno);
          continue;
        }
        // Non-blocking connect so that the deadline bounds a SYN to a black hole too.
        (void)SetNonBlocking(s.fd(), true);
        int rc = ::connect(s.fd(), ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
          pollfd pfd{s.fd(), POLLOUT, 0};
          int pr = ::poll(&pfd, 1, std::max(1, std::min(deadline.RemainingMs(), 5000)));
          if (pr == 1) {
            int err = 0;
            socklen_t elen = sizeof(err);
            getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &elen);
            rc = err == 0 ? 0 : -1;
            errno = err;
          } else {
            rc = -1;
            errno = ETIMEDOUT;
          }
        }
        if (rc == 0) {
          freeaddrinfo(res);
          (void)SetNonBlocking(s.fd(), false);
          *out = std::move(s);
          return Status::Ok();
        }
        last_error = ErrnoText(errno);
      }
      freeaddrinfo(res);
    }
    if (deadline.Expired()) break;
    std::this_thread::sleep_for(
        std::min<std::chrono::milliseconds>(backoff, std::chrono::milliseconds(std::max(1, deadline.RemainingMs()))));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  } while (!deadline.Expired());
  return UnavailableError("cannot connect to " + ep.ToString() + " after " + std::to_string(attempts) +
                          " attempts: " + last_error + "; check that the server is running and the address is right");
}

Status StartConnect(const Endpoint& ep, Socket* out) {
  addrinfo* res = nullptr;
  OPTCAST_RETURN_IF_ERROR(Resolve(ep, false, &res));
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!s.valid()) {
      last_error = "socket(): " + ErrnoText(errno);
      continue;
    }
    if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
      freeaddrinfo(res);
      *out = std::move(s);
      return Status::Ok();
    }
    last_error = ErrnoText(errno);
  }
  freeaddrinfo(res);
  return UnavailableError("connect to " + ep.ToString() + ": " + last_error);
}

Status CheckConnect(int fd, const std::string& peer, bool* connected) {
  *connected = false;
  pollfd pfd{fd, POLLOUT, 0};
  const int pr = ::poll(&pfd, 1, 0);
  if (pr < 0 && errno != EINTR) return UnavailableError("poll: " + ErrnoText(errno));
  if (pr <= 0) return Status::Ok();
  int err = 0;
  socklen_t elen = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) err = errno;
  if (err != 0) return UnavailableError("connect to " + peer + ": " + ErrnoText(err));
  // POLLHUP without an error: the peer accepted and closed at once; the first read tells.
  *connected = true;
  return Status::Ok();
}

Status ResolveNumeric(const Endpoint& ep, Endpoint* out) {
  addrinfo* res = nullptr;
  OPTCAST_RETURN_IF_ERROR(Resolve(ep, false, &res));
  char host[NI_MAXHOST] = {};
  const int rc = getnameinfo(res->ai_addr, res->ai_addrlen, host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(res);
  if (rc != 0) return UnavailableError("cannot resolve " + ep.ToString() + ": " + gai_strerror(rc));
  *out = Endpoint{host, ep.port};
  return Status::Ok();
}

Status Accept(const Socket& listener, Socket* out, std::string* peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return UnavailableError("no pending connection");
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      return ResourceExhausted("accept: " + ErrnoText(errno) + "; raise the open-file limit (ulimit -n)");
    }
    return UnavailableError("accept: " + ErrnoText(errno));
  }
  if (peer != nullptr) {
    char host[NI_MAXHOST] = {0};
    char serv[NI_MAXSERV] = {0};
    if (getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      *peer = std::string(host) + ":" + serv;
    }
  }
  *out = Socket(fd);
  return Status::Ok();
}

Status SendAll(int fd, const void* data, size_t len, Deadline deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return UnavailableError("send failed: " + ErrnoText(errno) + " (peer gone?)");
    }
    if (deadline.Expired()) return TimeoutError("send timed out: the peer is not reading");
    pollfd pfd{fd, POLLOUT, 0};
    ::poll(&pfd, 1, std::min(deadline.RemainingMs(), 1000));
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* data, size_t len, Deadline deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return UnavailableError("connection closed by peer");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return UnavailableError("recv failed: " + ErrnoText(errno));
    }
    if (deadline.Expired()) return TimeoutError("receive timed out: the peer sent nothing");
    pollfd pfd{fd, POLLIN, 0};
    ::poll(&pfd, 1, std::min(deadline.RemainingMs(), 1000));
  }
  return Status::Ok();
}

}  // namespace optcast::transport::posix
