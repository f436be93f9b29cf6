// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "optcast/status.h"
#include "transport/connection.h"

namespace optcast::transport {

// Accepts connections for a server. fd() becomes readable when Accept may succeed. Every
// transport (tcp/, ofi/) implements it; transport::Listen (factory.h) opens one.
class Listener {
 public:
  virtual ~Listener() = default;
  virtual int fd() const = 0;
  virtual uint16_t port() const = 0;
  // What carries the connections, for people: "tcp", or "ofi (provider tcp;ofi_rxm)".
  virtual std::string Describe() const = 0;
  // Accepts one pending connection: Unavailable when none is pending, ResourceExhausted when out
  // of descriptors, another error when one attempt failed (call again for the next).
  virtual Status Accept(uint64_t max_payload, std::unique_ptr<Connection>* out) = 0;
};

}  // namespace optcast::transport
