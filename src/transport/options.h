// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// How a transport is set up: which one carries the protocol, and each backend's own settings in a
// part of its own. The server and the client fill one in (ServerOptions::transport; the client
// from CommunicatorOptions) and transport::Listen, transport::Dial and Dialer::Create take it;
// each backend reads only its part. The values are checked where they are read in (flags,
// environment variables, Server::Start, Communicator::Create), not here. Every field has a
// default, so that `TransportOptions{Kind::kOfi}` or `TcpOptions{.latency_dscp = 10}` names only
// what it changes.

#include <string>

#include "transport/kind.h"

namespace optcast::transport {

// The tcp transport's connections.
struct TcpOptions {
  // Their TCP congestion control (posix/congestion.h): "" CUBIC where the host offers it,
  // "system" the host's default, or a name.
  std::string congestion{};
  // The DSCP that messages of TrafficClass::kLatency carry (posix/traffic_class.h), 0-63; 0 marks
  // nothing. 46 (Expedited Forwarding), the default of the server's and the client's settings.
  int latency_dscp = 46;
};

// The ofi transport's.
struct OfiOptions {
  // The libfabric provider ("": OPTCAST_OFI_PROVIDER, FI_PROVIDER, else automatic).
  std::string provider{};
};

struct TransportOptions {
  Kind kind = Kind::kTcp;
  TcpOptions tcp{};
  OfiOptions ofi{};
};

}  // namespace optcast::transport
