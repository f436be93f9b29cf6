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

#include "transport/ofi/fabric_connection.h"

namespace optcast::transport::ofi {

namespace {

constexpr size_t kMaxField = 4096;
// A client that has not sent its address within this long is dropped.
constexpr auto kAddressTimeout = std::chrono::seconds(10);

// Checks the 8 bytes that start an address message and reads the two lengths.
Status CheckHead(const uint8_t* h, const std::string& who, size_t* plen, size_t* alen) {
  const uint32_t magic = h[0] | (h[1] << 8) | (h[2] << 16) | (static_cast<uint32_t>(h[3]) << 24);
  if (magic == kFrameMagic) {
    return ProtocolError(who +
                         " uses the built-in tcp transport, not ofi; use the same --transport (or "
                         "OPTCAST_TRANSPORT) on servers and clients");
  }
  if (magic != kAddressMagic) {
    return ProtocolError(who + " did not send a fabric address; is it an Optcast endpoint using the ofi transport?");
  }
  *plen = h[4] | (h[5] << 8);
  *alen = h[6] | (h[7] << 8);
  if (*plen > kMaxField || *alen > kMaxField) return ProtocolError(who + " sent an oversized fabric address");
  return Status::Ok();
}

Status SendAddress(int fd, const std::string& provider, const std::vector<uint8_t>& address, Deadline d) {
  std::vector<uint8_t> msg(8);
  const uint32_t magic = kAddressMagic;
  const uint16_t plen = static_cast<uint16_t>(provider.size());
  const uint16_t alen = static_cast<uint16_t>(address.size());
  for (int i = 0; i < 4; ++i) msg[i] = static_cast<uint8_t>(magic >> (8 * i));
  msg[4] = static_cast<uint8_t>(plen);
  msg[5] = static_cast<uint8_t>(plen >> 8);
  msg[6] = static_cast<uint8_t>(alen);
  msg[7] = static_cast<uint8_t>(alen >> 8);
  msg.insert(msg.end(), provider.begin(), provider.end());
  msg.insert(msg.end(), address.begin(), address.end());
  return tcp::SendAll(fd, msg.data(), msg.size(), d);
}

// Reads the peer's provider and address; `who` names the peer in errors.
Status RecvAddress(int fd, Deadline d, const std::string& who, std::string* provider, std::vector<uint8_t>* address) {
  uint8_t h[8];
  OPTCAST_RETURN_IF_ERROR(tcp::RecvAll(fd, h, sizeof(h), d));
  size_t plen = 0, alen = 0;
  OPTCAST_RETURN_IF_ERROR(CheckHead(h, who, &plen, &alen));
  provider->resize(plen);
  address->resize(alen);
  if (plen > 0) OPTCAST_RETURN_IF_ERROR(tcp::RecvAll(fd, provider->data(), plen, d));
  if (alen > 0) OPTCAST_RETURN_IF_ERROR(tcp::RecvAll(fd, address->data(), alen, d));
  return Status::Ok();
}

}  // namespace

std::string LocalHostToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) return "";
  tcp::Socket s(::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const bool ok = s.valid() && ::connect(s.fd(), res->ai_addr, res->ai_addrlen) == 0;
  freeaddrinfo(res);
  if (!ok) return "";
  const int fd = s.fd();
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

Status FabricListener::Open(const Endpoint& ep, const std::string& provider, std::unique_ptr<Listener>* out) {
  auto l = std::make_unique<FabricListener>();
  const bool wildcard = ep.host == "0.0.0.0" || ep.host == "::" || ep.host.empty();
  OPTCAST_RETURN_IF_ERROR(
      Fabric::Open(provider.empty() ? RequestedProvider() : provider, wildcard ? "" : ep.host, &l->fabric_));
  OPTCAST_RETURN_IF_ERROR(tcp::Listen(ep, &l->socket_));
  OPTCAST_RETURN_IF_ERROR(tcp::SetNonBlocking(l->socket_.fd(), true));
  OPTCAST_RETURN_IF_ERROR(tcp::LocalPort(l->socket_, &l->port_));
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
    tcp::Socket s;
    std::string peer;
    Status st = tcp::Accept(socket_, &s, &peer);
    if (st.code() == Code::kUnavailable) break;
    OPTCAST_RETURN_IF_ERROR(st);
    if (!tcp::ConfigureDataSocket(s.fd(), true).ok()) continue;
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
      if (pend.bytes.size() > 8 + 2 * kMaxField) break;
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
    if (magic == kAddressMagic && plen <= kMaxField && alen <= kMaxField) return false;
  }
  const Deadline d = Deadline::After(std::chrono::milliseconds(1000));
  std::string provider;
  std::vector<uint8_t> address;
  size_t plen_checked = 0, alen_checked = 0;
  *st = CheckHead(b.data(), "client " + pend.peer, &plen_checked, &alen_checked);
  if (st->ok() && b.size() != 8 + plen + alen)
    *st = ProtocolError("client " + pend.peer + " sent more than its address");
  if (!st->ok()) return true;
  provider.assign(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(plen));
  address.assign(b.begin() + 8 + static_cast<std::ptrdiff_t>(plen), b.end());
  tcp::Socket s = std::move(pend.socket);
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

Status DialFabric(const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out) {
  std::shared_ptr<Fabric> fabric;
  OPTCAST_RETURN_IF_ERROR(Fabric::Open(RequestedProvider(), LocalHostToward(ep.host), &fabric));
  return DialFabric(std::move(fabric), ep, deadline, max_payload, out);
}

Status DialFabric(std::shared_ptr<Fabric> fabric, const Endpoint& ep, Deadline deadline, uint64_t max_payload,
                  std::unique_ptr<Connection>* out) {
  // The endpoint exists before the connection, so the address follows the connect at once.
  tcp::Socket s;
  OPTCAST_RETURN_IF_ERROR(tcp::Connect(ep, deadline, &s));
  OPTCAST_RETURN_IF_ERROR(tcp::ConfigureDataSocket(s.fd(), true));
  const int fd = s.fd();
  std::unique_ptr<FabricConnection> c;
  OPTCAST_RETURN_IF_ERROR(FabricConnection::Create(fabric, std::move(s), max_payload, ep.ToString(), &c));
  const std::string who = "server " + ep.ToString();
  // `deadline` bounds reaching the server; once connected, the exchange gets as long as the
  // server gives a client to send its address (a loaded server may take a moment).
  const Deadline exchange{std::max(deadline.at, Clock::now() + kAddressTimeout)};
  Status st = SendAddress(fd, fabric->provider(), c->local_address(), exchange);
  std::string provider;
  std::vector<uint8_t> address;
  if (st.ok()) st = RecvAddress(fd, exchange, who, &provider, &address);
  if (!st.ok()) return Status(st.code(), st.message().rfind(who, 0) == 0 ? st.message() : who + ": " + st.message());
  if (address.empty()) return InvalidArgument(who + " refused the fabric connection: " + provider);
  OPTCAST_RETURN_IF_ERROR(c->SetPeerAddress(address));
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace optcast::transport::ofi
