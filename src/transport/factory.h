// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The one place that turns a transport Kind into an implementation: every backend (tcp/, ofi/)
// provides a connection, a listener and a dialer, and only factory.cc names them. A Kind this
// build does not carry (ofi without libfabric) is refused with CheckKindBuilt's error. Each
// backend is set up with its part of TransportOptions (options.h).

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
#include "transport/options.h"
#include "transport/posix/socket.h"

namespace optcast::transport {

// Listens on `ep` (port 0 picks one) with the transport `options.kind`, set up with its part of
// `options`.
Status Listen(const TransportOptions& options, const Endpoint& ep, std::unique_ptr<Listener>* out);
// Connects to a server listening with the same transport, retrying refused attempts until
// `deadline`. The connection is non-blocking and ready for Send/ReadAvailable.
Status Dial(const TransportOptions& options, const Endpoint& ep, Deadline deadline, uint64_t max_payload,
            std::unique_ptr<Connection>* out);
// Dialer::Create (dialer.h) is defined here too.

// The tcp transport's connection over a stream socket that is already connected (or accepted),
// for a program that makes its own TCP connections but frames messages as the transport does
// (the NCCL plugin's point-to-point net). The socket should be non-blocking and configured
// (posix::ConfigureDataSocket); `options` as for the tcp transport's own connections.
std::unique_ptr<Connection> WrapStreamSocket(posix::Socket socket, uint64_t max_payload, std::string peer,
                                             const TcpOptions& options = {});

}  // namespace optcast::transport
