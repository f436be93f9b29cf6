// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/tcp/dialer.h"

#include "transport/posix/congestion.h"
#include "transport/posix/socket.h"
#include "transport/tcp/connection.h"

namespace optcast::transport::tcp {

namespace {

// A registration that only records that the caller asked.
class NoRegistration final : public MemoryRegistration {};

}  // namespace

Status DialStream(const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out,
                  const TcpOptions& options) {
  posix::Socket s;
  OPTCAST_RETURN_IF_ERROR(posix::Connect(ep, deadline, &s));
  OPTCAST_RETURN_IF_ERROR(posix::ConfigureDataSocket(s.fd(), true));
  OPTCAST_RETURN_IF_ERROR(posix::ApplyCongestionControl(s.fd(), options.congestion));
  *out = std::make_unique<StreamConnection>(std::move(s), max_payload, ep.ToString(), options);
  return Status::Ok();
}

Status StartDialStream(const Endpoint& ep, uint64_t max_payload, std::unique_ptr<Connection>* out,
                       const TcpOptions& options) {
  posix::Socket s;
  OPTCAST_RETURN_IF_ERROR(posix::StartConnect(ep, &s));
  OPTCAST_RETURN_IF_ERROR(posix::ConfigureDataSocket(s.fd(), true));
  // Set before the handshake completes, so the whole connection runs under it.
  OPTCAST_RETURN_IF_ERROR(posix::ApplyCongestionControl(s.fd(), options.congestion));
  *out = std::make_unique<StreamConnection>(std::move(s), max_payload, ep.ToString(), options, /*connecting=*/true);
  return Status::Ok();
}

Status StreamDialer::Register(const void* /*data*/, size_t /*size*/, std::unique_ptr<MemoryRegistration>* out) {
  *out = std::make_unique<NoRegistration>();
  return Status::Ok();
}

}  // namespace optcast::transport::tcp
