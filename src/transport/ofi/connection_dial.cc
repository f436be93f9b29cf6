// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The dial side of FabricConnection (Dialer::StartDial): the control socket's connect and the
// exchange of fabric addresses over it, advanced without blocking from Flush, ReadAvailable and
// DiscardAvailable until the server's address has arrived.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "transport/ofi/address.h"
#include "transport/ofi/connection.h"

namespace optcast::transport::ofi {

Status FabricConnection::StartDial(std::shared_ptr<Fabric> fabric, posix::Socket connecting, uint64_t max_payload,
                                   std::string peer, std::unique_ptr<FabricConnection>* out) {
  std::unique_ptr<FabricConnection> c(new FabricConnection());
  OPTCAST_RETURN_IF_ERROR(c->Init(std::move(fabric), std::move(connecting), max_payload, std::move(peer)));
  c->dialing_ = true;
  c->dial_out_ = EncodeAddress(c->fabric_->provider(), c->local_address_);
  // Writable: the connect finished (or failed); fd() turns readable then.
  OPTCAST_RETURN_IF_ERROR(c->WatchControl(true));
  *out = std::move(c);
  return Status::Ok();
}

Status FabricConnection::WatchControl(bool writable) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (writable ? EPOLLOUT : 0u);
  ev.data.fd = control_.fd();
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, control_.fd(), &ev) != 0) {
    return InternalError(std::string("epoll_ctl: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status FabricConnection::AdvanceDial() {
  const std::string who = "server " + peer_;
  if (!dial_connected_) {
    OPTCAST_RETURN_IF_ERROR(posix::CheckConnect(control_.fd(), peer_, &dial_connected_));
    if (!dial_connected_) return Status::Ok();
  }
  if (dial_sent_ < dial_out_.size()) {
    while (dial_sent_ < dial_out_.size()) {
      const ssize_t n = ::send(control_.fd(), dial_out_.data() + dial_sent_, dial_out_.size() - dial_sent_,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        dial_sent_ += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok();
      return UnavailableError("send to " + who + " failed: " + std::strerror(errno));
    }
    // All sent: from now on only the answer matters, and a writable socket would keep waking us.
    OPTCAST_RETURN_IF_ERROR(WatchControl(false));
  }
  uint8_t buf[1024];
  for (;;) {
    const ssize_t n = ::recv(control_.fd(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      dial_in_.insert(dial_in_.end(), buf, buf + n);
      if (dial_in_.size() > 8 + 2 * kMaxAddressField) return ProtocolError(who + " sent more than its fabric address");
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n == 0) {
      return UnavailableError(who +
                              " closed the connection before answering with its fabric address; is it an Optcast "
                              "server using the ofi transport?");
    }
    return UnavailableError("receive from " + who + " failed: " + std::strerror(errno));
  }
  if (dial_in_.size() < 8) return Status::Ok();
  size_t plen = 0, alen = 0;
  OPTCAST_RETURN_IF_ERROR(CheckAddressHead(dial_in_.data(), who, &plen, &alen));
  if (dial_in_.size() < 8 + plen + alen) return Status::Ok();
  if (dial_in_.size() > 8 + plen + alen) return ProtocolError(who + " sent more than its fabric address");
  const auto* b = dial_in_.data();
  const std::string provider(b + 8, b + 8 + plen);
  const std::vector<uint8_t> address(b + 8 + plen, b + 8 + plen + alen);
  if (address.empty()) return InvalidArgument(who + " refused the fabric connection: " + provider);
  OPTCAST_RETURN_IF_ERROR(SetPeerAddress(address));
  dialing_ = false;
  dial_out_.clear();
  dial_in_.clear();
  if (shut_after_dial_) ::shutdown(control_.fd(), SHUT_WR);
  return Status::Ok();
}

}  // namespace optcast::transport::ofi
