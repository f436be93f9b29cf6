// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/factory.h"

#include "transport/tcp/connection.h"
#include "transport/tcp/dialer.h"
#include "transport/tcp/listener.h"
#if OPTCAST_WITH_OFI
#include "transport/ofi/dialer.h"
#include "transport/ofi/listener.h"
#endif

namespace optcast::transport {

Status Listen(const TransportOptions& options, const Endpoint& ep, std::unique_ptr<Listener>* out) {
  OPTCAST_RETURN_IF_ERROR(CheckKindBuilt(options.kind));
#if OPTCAST_WITH_OFI
  if (options.kind == Kind::kOfi) return ofi::FabricListener::Open(ep, options.ofi.provider, out);
#endif
  return tcp::StreamListener::Open(ep, out, options.tcp);
}

Status Dial(const TransportOptions& options, const Endpoint& ep, Deadline deadline, uint64_t max_payload,
            std::unique_ptr<Connection>* out) {
  OPTCAST_RETURN_IF_ERROR(CheckKindBuilt(options.kind));
#if OPTCAST_WITH_OFI
  if (options.kind == Kind::kOfi) return ofi::DialFabric(ep, deadline, max_payload, out, options.ofi.provider);
#endif
  return tcp::DialStream(ep, deadline, max_payload, out, options.tcp);
}

Status Dialer::Create(const TransportOptions& options, std::unique_ptr<Dialer>* out) {
  OPTCAST_RETURN_IF_ERROR(CheckKindBuilt(options.kind));
#if OPTCAST_WITH_OFI
  if (options.kind == Kind::kOfi) {
    *out = std::make_unique<ofi::FabricDialer>(options.ofi.provider);
    return Status::Ok();
  }
#endif
  *out = std::make_unique<tcp::StreamDialer>(options.tcp);
  return Status::Ok();
}

std::unique_ptr<Connection> WrapStreamSocket(posix::Socket socket, uint64_t max_payload, std::string peer,
                                             const TcpOptions& options) {
  return std::make_unique<tcp::StreamConnection>(std::move(socket), max_payload, std::move(peer), options);
}

}  // namespace optcast::transport
