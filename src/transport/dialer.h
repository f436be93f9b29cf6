// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/env.h"
#include "optcast/status.h"
#include "transport/connection.h"
#include "transport/endpoint.h"
#include "transport/kind.h"
#include "transport/options.h"

namespace optcast::transport {

// A buffer registered with a transport; the registration ends when this is destroyed.
class MemoryRegistration {
 public:
  virtual ~MemoryRegistration() = default;
};

// Opens one client's connections to its servers and registers the memory they move.
//
// Over libfabric the connections share one fabric domain per local interface, so that a buffer
// registered once (fi_mr_reg) serves every connection and every later send or receive from it:
// this is what the NCCL plugin's regMr maps onto. The built-in TCP transport registers nothing.
// Not thread-safe: one thread at a time, like the connections it opens.
class Dialer {
 public:
  // Defined in factory.cc: the error of CheckKindBuilt for a transport this build does not carry.
  // The connections are the transport `options.kind`'s, set up with its part of `options`, as for
  // transport::Listen.
  static Status Create(const TransportOptions& options, std::unique_ptr<Dialer>* out);
  virtual ~Dialer() = default;

  // Connects to a server listening with the same transport (see transport::Dial).
  virtual Status Dial(const Endpoint& ep, Deadline deadline, uint64_t max_payload,
                      std::unique_ptr<Connection>* out) = 0;
  // Starts a connection without waiting for it, for an event loop that must never block: *out is
  // returned at once and is driven like any connection (fd() in the loop, Flush, ReadAvailable).
  // Messages sent before it is up wait in its queue; Connected() turns true once it is up, and a
  // peer that refuses, cannot be reached or rejects the setup makes the next Flush or
  // ReadAvailable fail with an error naming `ep`. A connection that never comes up is the
  // caller's to time out. `ep.host` should be numeric (posix::ResolveNumeric): a name is looked up
  // here, which can block.
  virtual Status StartDial(const Endpoint& ep, uint64_t max_payload, std::unique_ptr<Connection>* out) = 0;
  // Registers [data, data+size) in every domain the connections dialled so far use (whether or
  // not the provider needs registered memory: later sends and receives in it use it), held until
  // *out is destroyed; then the registration is closed as soon as no send or receive uses it
  // (the memory may be freed after that). An empty buffer registers nothing. A domain opened by
  // a later Dial registers the buffer on its first use there instead.
  virtual Status Register(const void* data, size_t size, std::unique_ptr<MemoryRegistration>* out) = 0;
  // Registrations made in the transport so far (fi_mr_reg calls, explicit and on first use),
  // and those open now. Both 0 for TCP.
  virtual uint64_t registrations_made() const = 0;
  virtual uint64_t registrations_open() const = 0;
  // The transport registers every buffer it moves (libfabric's FI_MR_LOCAL, as efa and verbs
  // need): buffers not registered beforehand are registered on first use.
  virtual bool registration_required() const = 0;
};

}  // namespace optcast::transport
