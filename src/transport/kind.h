// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/env.h"
#include "optcast/status.h"
#include "transport/connection.h"
#include "transport/endpoint.h"

namespace optcast::transport {

// Which transport carries the protocol: the built-in TCP streams, or libfabric (ofi/).
enum class Kind { kTcp, kOfi };

const char* KindName(Kind k);
// Parses "tcp" or "ofi"; the error names the accepted values and `what` (the flag or variable).
Status ParseKind(const std::string& text, const std::string& what, Kind* out);
// OPTCAST_TRANSPORT, or `fallback` when it is unset.
Status KindFromEnvironment(Kind fallback, Kind* out);

// Listens on `ep` (port 0 picks one) with the given transport. `ofi_provider` picks the libfabric
// provider for Kind::kOfi ("": OPTCAST_OFI_PROVIDER, FI_PROVIDER, else automatic).
Status Listen(Kind kind, const Endpoint& ep, std::unique_ptr<Listener>* out, const std::string& ofi_provider = "");
// Connects to a server listening with the same transport, retrying refused attempts until
// `deadline`. The connection is non-blocking and ready for Send/ReadAvailable.
Status Dial(Kind kind, const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out);

}  // namespace optcast::transport
