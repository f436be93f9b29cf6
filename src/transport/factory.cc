// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/factory.h"

#include "transport/tcp/dialer.h"
#include "transport/tcp/listener.h"
#if OPTCAST_WITH_OFI
#include "transport/ofi/dialer.h"
#include "transport/ofi/listener.h"
#endif

namespace optcast::transport {

Status Listen(Kind kind, const Endpoint& ep, std::unique_ptr<Listener>* out, const std::string& ofi_provider,
              const std::string& tcp_congestion) {
  OPTCAST_RETURN_IF_ERROR(CheckKindBuilt(kind));
#if OPTCAST_WITH_OFI
  if (kind == Kind::kOfi) return ofi::FabricListener::Open(ep, ofi_provider, out);
#endif
  return tcp::StreamListener::Open(ep, out, tcp_congestion);
}

Status Dial(Kind kind, const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out) {
  OPTCAST_RETURN_IF_ERROR(CheckKindBuilt(kind));
#if OPTCAST_WITH_OFI
  if (kind == Kind::kOfi) return ofi::DialFabric(ep, deadline, max_payload, out);
#endif
  return tcp::DialStream(ep, deadline, max_payload, out);
}

Status Dialer::Create(Kind kind, std::unique_ptr<Dialer>* out, const std::string& ofi_provider,
                      const std::string& tcp_congestion) {
  OPTCAST_RETURN_IF_ERROR(CheckKindBuilt(kind));
#if OPTCAST_WITH_OFI
  if (kind == Kind::kOfi) {
    *out = std::make_unique<ofi::FabricDialer>(ofi_provider);
    return Status::Ok();
  }
#endif
  *out = std::make_unique<tcp::StreamDialer>(tcp_congestion);
  return Status::Ok();
}

}  // namespace optcast::transport
