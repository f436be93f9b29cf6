// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/dialer.h"

#include "transport/ofi/fabric_dialer.h"
#include "transport/tcp/listener.h"

namespace optcast::transport {

namespace {

// Streams copy through the kernel: nothing to register, so a registration only records that the
// caller asked.
class NoRegistration final : public MemoryRegistration {};

class StreamDialer final : public Dialer {
 public:
  Status Dial(const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out) override {
    return tcp::DialStream(ep, deadline, max_payload, out);
  }
  Status Register(const void* /*data*/, size_t /*size*/, std::unique_ptr<MemoryRegistration>* out) override {
    *out = std::make_unique<NoRegistration>();
    return Status::Ok();
  }
  uint64_t registrations_made() const override { return 0; }
  uint64_t registrations_open() const override { return 0; }
  bool registration_required() const override { return false; }
};

}  // namespace

Status Dialer::Create(Kind kind, std::unique_ptr<Dialer>* out) {
  if (kind == Kind::kOfi) {
    *out = std::make_unique<ofi::FabricDialer>();
  } else {
    *out = std::make_unique<StreamDialer>();
  }
  return Status::Ok();
}

}  // namespace optcast::transport
