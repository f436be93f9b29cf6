// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The one place that turns a transport Kind into an implementation: every backend (tcp/, ofi/)
// provides a connection, a listener and a dialer, and only factory.cc names them. A Kind this
// build does not carry (ofi without libfabric) is refused with CheckKindBuilt's error.

#include <cstdint>
#include <memory>
#include <string>

#include "common/env.h"
#include "optcast/status.h"
#include "transport/connection.h"
#include "transport/dialer.h"
#include "transport/endpoint.h"
#include "transport/kind.h"
#include "transport/listener.h"

namespace optcast::transport {

// Listens on `ep` (port 0 picks one) with the given transport. `ofi_provider` picks the libfabric
// provider for Kind::kOfi ("": OPTCAST_OFI_PROVIDER, FI_PROVIDER, else automatic); `tcp_congestion`
// the TCP congestion control of Kind::kTcp's connections (posix/congestion.h).
Status Listen(Kind kind, const Endpoint& ep, std::unique_ptr<Listener>* out, const std::string& ofi_provider = "",
              const std::string& tcp_congestion = "");
// Connects to a server listening with the same transport, retrying refused attempts until
// `deadline`. The connection is non-blocking and ready for Send/ReadAvailable.
Status Dial(Kind kind, const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out);
// Dialer::Create (dialer.h) is defined here too.

}  // namespace optcast::transport
