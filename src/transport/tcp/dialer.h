// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/env.h"
#include "transport/dialer.h"
#include "transport/endpoint.h"
#include "transport/options.h"

namespace optcast::transport::tcp {

// Connects and returns a non-blocking StreamConnection set up with `options` (its congestion
// control: posix::ApplyCongestionControl, "" the data connections' default).
Status DialStream(const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out,
                  const TcpOptions& options = {});

// Starts a non-blocking connect and returns its StreamConnection at once (Dialer::StartDial).
Status StartDialStream(const Endpoint& ep, uint64_t max_payload, std::unique_ptr<Connection>* out,
                       const TcpOptions& options = {});

// The TCP Dialer: streams copy through the kernel, so there is nothing to register.
class StreamDialer final : public Dialer {
 public:
  explicit StreamDialer(TcpOptions options = {}) : options_(std::move(options)) {}
  Status Dial(const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out) override {
    return DialStream(ep, deadline, max_payload, out, options_);
  }
  Status StartDial(const Endpoint& ep, uint64_t max_payload, std::unique_ptr<Connection>* out) override {
    return StartDialStream(ep, max_payload, out, options_);
  }
  Status Register(const void* data, size_t size, std::unique_ptr<MemoryRegistration>* out) override;
  uint64_t registrations_made() const override { return 0; }
  uint64_t registrations_open() const override { return 0; }
  bool registration_required() const override { return false; }

 private:
  TcpOptions options_;
};

}  // namespace optcast::transport::tcp
