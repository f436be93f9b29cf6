// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optcast/status.h"

namespace optcast::transport {

// A "host:port" address. IPv4 literals and names resolved through getaddrinfo.
struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// Parses "host:port", "[v6]:port" or ":port" (host = 0.0.0.0). `default_port` applies to a bare
// host when nonzero.
// With `allow_any_port`, port 0 (the system picks a free one) is accepted, for listening.
Status ParseEndpoint(const std::string& text, Endpoint* out, uint16_t default_port = 0, bool allow_any_port = false);

// True for addresses that only this machine can reach: 127.0.0.0/8, ::1, "localhost".
bool IsLoopbackHost(const std::string& host);

// Parses a comma-separated list of endpoints.
Status ParseEndpointList(const std::string& text, std::vector<Endpoint>* out, uint16_t default_port = 0);

}  // namespace optcast::transport
