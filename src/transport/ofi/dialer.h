// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "transport/dialer.h"
#include "transport/endpoint.h"
#include "transport/ofi/fabric.h"

namespace optcast::transport::ofi {

// Connects to a FabricListener through a fabric of its own (`provider` "" takes
// RequestedProvider()).
Status DialFabric(const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out,
                  const std::string& provider = "");
// Connects through `fabric`, which the connection shares with others (and their registrations).
Status DialFabric(std::shared_ptr<Fabric> fabric, const Endpoint& ep, Deadline deadline, uint64_t max_payload,
                  std::unique_ptr<Connection>* out);

// The libfabric Dialer: one Fabric (and so one domain and one registration cache) per local
// interface that its connections leave through, shared by those connections.
class FabricDialer final : public Dialer {
 public:
  // `provider` "" takes RequestedProvider().
  explicit FabricDialer(std::string provider = "") : provider_(std::move(provider)) {}
  Status Dial(const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out) override;
  // The connect and the address exchange run inside the connection (FabricConnection::StartDial);
  // only the first dial through a local interface waits, for its fabric and domain to open.
  Status StartDial(const Endpoint& ep, uint64_t max_payload, std::unique_ptr<Connection>* out) override;
  Status Register(const void* data, size_t size, std::unique_ptr<MemoryRegistration>* out) override;
  uint64_t registrations_made() const override;
  uint64_t registrations_open() const override;
  bool registration_required() const override;

 private:
  // The fabric for connections leaving through the interface toward `host`, opened on first use.
  Status FabricToward(const std::string& host, std::shared_ptr<Fabric>* out);

  std::string provider_;
  std::vector<std::pair<std::string, std::shared_ptr<Fabric>>> fabrics_;  // by local address
};

}  // namespace optcast::transport::ofi
