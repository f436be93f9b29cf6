// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/kind.h"

#include "transport/ofi/listener.h"
#include "transport/tcp/listener.h"

namespace optcast::transport {

const char* KindName(Kind k) { return k == Kind::kOfi ? "ofi" : "tcp"; }

Status ParseKind(const std::string& text, const std::string& what, Kind* out) {
  if (text == "tcp") {
    *out = Kind::kTcp;
  } else if (text == "ofi") {
    *out = Kind::kOfi;
  } else {
    return InvalidArgument(what + "='" + text + "' is not a transport; use tcp (built in) or ofi (libfabric)");
  }
  return Status::Ok();
}

Status KindFromEnvironment(Kind fallback, Kind* out) {
  *out = fallback;
  if (auto v = GetEnv("OPTCAST_TRANSPORT")) return ParseKind(*v, "OPTCAST_TRANSPORT", out);
  return Status::Ok();
}

Status Listen(Kind kind, const Endpoint& ep, std::unique_ptr<Listener>* out, const std::string& ofi_provider) {
  if (kind == Kind::kOfi) return ofi::FabricListener::Open(ep, ofi_provider, out);
  return tcp::StreamListener::Open(ep, out);
}

Status Dial(Kind kind, const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out) {
  if (kind == Kind::kOfi) return ofi::DialFabric(ep, deadline, max_payload, out);
  return tcp::DialStream(ep, deadline, max_payload, out);
}

}  // namespace optcast::transport
