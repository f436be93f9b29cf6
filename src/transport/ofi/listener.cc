// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/ofi/listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/ofi/address.h"
#include "transport/ofi/connection.h"
#include "transport/posix/socket.h"

namespace optcast::transport::ofi {

Status FabricListener::Open(const Endpoint& ep, const std::string& provider, std::unique_ptr<Listener>* out) {
  auto l = std::make_unique<FabricListener>();
  const bool wildcard = ep.host == "0.0.0.0" || ep.host == "::" || ep.host.empty();
  OPTCAST_RETURN_IF_ERROR(
      Fabric::Open(provider.empty() ? RequestedProvider() : provider, wildcard ? "" : ep.host, &l->fabric_));
  OPTCAST_RETURN_IF_ERROR(posix::Listen(ep, &l->socket_));
  OPTCAST_RETURN_IF_ERROR(posix::SetNonBlocking(l->socket_.fd(), true));
  OPTCAST_RETURN_IF_ERROR(posix::LocalPort(l->socket_, &l->port_));
  l->epfd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (l->epfd_ < 0 || epoll_ctl(l->epfd_, EPOLL_CTL_ADD, l->socket_.fd(), &ev) != 0) {
    return InternalError(std::string("epoll: ") + std::strerror(errno));
  }
  *out = std::move(l);
  return Status::Ok();
}

FabricListener::~FabricListener() {
  if (epfd_ >= 0) close(epfd_);
}

Status FabricListener::Accept(uint64_t max_payload, std::unique_ptr<Connection>* out) {
  // New clients join the pending ones; none is waited for.
  for (;;) {
    posix::Socket s;
    std::string peer;
    Status st = posix::Accept(socket_, &s, &peer);
    if (st.code() == Code::kUnavailable) break;
    OPTCAST_RETURN_IF_ERROR(st);
    if (!posix::ConfigureDataSocket(s.fd(), true).ok()) continue;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, s.fd(), &ev) != 0) continue;
    auto p = std::make_unique<Pending>();
    p->socket = std::move(s);
    p->peer = std::move(peer);
    p->since = Clock::now();
    pending_.push_back(std::move(p));
  }
  const auto now = Clock::now();
  for (size_t i = 0; i < pending_.size(); ++i) {
    Status st;
    const bool over = Advance(*pending_[i], max_payload, out, &st) || now - pending_[i]->since > kAddressTimeout;
    if (!over) continue;
    if (pending_[i]->socket.valid()) epoll_ctl(epfd_, EPOLL_CTL_DEL, pending_[i]->socket.fd(), nullptr);
    if (st.ok() && !*out) st = UnavailableError("client " + pending_[i]->peer + " sent no fabric address in time");
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    // A failed exchange is reported; the caller calls again for the other clients.
    return st.ok() ? st : Status(st.code() == Code::kUnavailable ? Code::kProtocol : st.code(), st.message());
  }
  return UnavailableError("no pending connection");
}

bool FabricListener::Advance(Pending& pend, uint64_t max_payload, std::unique_ptr<Connection>* out, Status* st) {
  uint8_t buf[1024];
  for (;;) {
    const ssize_t n = ::recv(pend.socket.fd(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      pend.bytes.insert(pend.bytes.end(), buf, buf + n);
      if (pend.bytes.size() > 8 + 2 * kMaxAddressField) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    *st = UnavailableError("client " + pend.peer + " closed before sending its fabric address");
    return true;
  }
  const std::vector<uint8_t>& b = pend.bytes;
  if (b.size() < 8) return false;
  const size_t plen = b[4] | (b[5] << 8);
  const size_t alen = b[6] | (b[7] << 8);
  if (b.size() < 8 + plen + alen) {
    // Only the magic says whether more is worth waiting for.
    const uint32_t magic = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
    if (magic == kAddressMagic && plen <= kMaxAddressField && alen <= kMaxAddressField) return false;
  }
  const Deadline d = Deadline::After(std::chrono::milliseconds(1000));
  std::string provider;
  std::vector<uint8_t> address;
  size_t plen_checked = 0, alen_checked = 0;
  *st = CheckAddressHead(b.data(), "client " + pend.peer, &plen_checked, &alen_checked);
  if (st->ok() && b.size() != 8 + plen + alen)
    *st = ProtocolError("client " + pend.peer + " sent more than its address");
  if (!st->ok()) return true;
  provider.assign(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(plen));
  address.assign(b.begin() + 8 + static_cast<std::ptrdiff_t>(plen), b.end());
  posix::Socket s = std::move(pend.socket);
  const std::string peer = pend.peer;
  if (provider != fabric_->provider()) {
    const std::string why = "this server uses libfabric provider '" + fabric_->provider() + "', the client '" +
                            provider + "'; set OPTCAST_OFI_PROVIDER='" + fabric_->provider() + "' on the client";
    (void)SendAddress(s.fd(), why, {}, d);
    *st = InvalidArgument("client " + peer + ": " + why);
    return true;
  }
  epoll_ctl(epfd_, EPOLL_CTL_DEL, s.fd(), nullptr);
  const int fd = s.fd();  // stays open: the connection keeps it as its control socket
  std::unique_ptr<FabricConnection> c;
  *st = FabricConnection::Create(fabric_, std::move(s), max_payload, peer, &c);
  if (st->ok()) *st = SendAddress(fd, fabric_->provider(), c->local_address(), d);
  if (st->ok()) *st = c->SetPeerAddress(address);
  if (st->ok()) *out = std::move(c);
  return true;
}

}  // namespace optcast::transport::ofi
