// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/tcp/listener.h"

#include "transport/posix/congestion.h"
#include "transport/tcp/connection.h"

namespace optcast::transport::tcp {

Status StreamListener::Open(const Endpoint& ep, std::unique_ptr<Listener>* out, const TcpOptions& options) {
  auto l = std::make_unique<StreamListener>();
  OPTCAST_RETURN_IF_ERROR(posix::Listen(ep, &l->socket_));
  // A name that cannot be set fails here, at start, rather than at the first connection.
  OPTCAST_RETURN_IF_ERROR(posix::ApplyCongestionControl(l->socket_.fd(), options.congestion));
  l->options_ = options;
  OPTCAST_RETURN_IF_ERROR(posix::SetNonBlocking(l->socket_.fd(), true));
  OPTCAST_RETURN_IF_ERROR(posix::LocalPort(l->socket_, &l->port_));
  *out = std::move(l);
  return Status::Ok();
}

Status StreamListener::Accept(uint64_t max_payload, std::unique_ptr<Connection>* out) {
  posix::Socket s;
  std::string peer;
  OPTCAST_RETURN_IF_ERROR(posix::Accept(socket_, &s, &peer));
  OPTCAST_RETURN_IF_ERROR(posix::ConfigureDataSocket(s.fd(), true));
  // Accepted sockets inherit the listener's setting; set it again so that does not have to hold.
  OPTCAST_RETURN_IF_ERROR(posix::ApplyCongestionControl(s.fd(), options_.congestion));
  *out = std::make_unique<StreamConnection>(std::move(s), max_payload, std::move(peer), options_);
  return Status::Ok();
}

}  // namespace optcast::transport::tcp
