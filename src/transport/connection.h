// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "optcast/status.h"
#include "transport/message.h"

namespace optcast::transport {

// A message-level connection to one peer, driven by one thread from an event loop. Every
// transport (tcp/, ofi/) implements it. fd() becomes readable (level-triggered: epoll, poll) when
// ReadAvailable has something to do; writes are queued by Send and pushed out by Flush, and a
// transport whose descriptor cannot signal "writable" makes progress on queued writes inside
// ReadAvailable instead.
class Connection {
 public:
  virtual ~Connection() = default;

  virtual int fd() const = 0;
  virtual const std::string& peer() const = 0;
  // False while a connection started by Dialer::StartDial is still being set up (as of the last
  // Flush or ReadAvailable): messages sent meanwhile wait in the queue, and a setup that fails is
  // the error of the next Flush or ReadAvailable.
  virtual bool Connected() const { return true; }
  // True when fd() never reports "writable" (the owner need not ask for it).
  virtual bool WritesSignalReadable() const { return false; }

  // Queues a message; bytes go out on Flush().
  virtual void Send(OutMessage msg) = 0;
  // Hands over what the transport accepts now. Error: the connection is broken.
  virtual Status Flush() = 0;
  virtual bool HasPendingWrites() const = 0;
  virtual size_t PendingWriteCount() const = 0;

  // Delivers complete messages to `handler` (up to about `budget` bytes). Returns Unavailable
  // when the peer closed, Protocol on garbage, or the handler's error.
  virtual Status ReadAvailable(MessageHandler& handler, size_t budget = 8u << 20) = 0;

  // For queued messages whose tag satisfies `pred`: drops those not started, and makes sure the
  // caller's buffers of the rest are no longer read once this returns (a copy, or the connection
  // is broken off), so that the caller may free them.
  virtual void DetachPayloads(const std::function<bool(uint64_t)>& pred) = 0;
  // Forgets every queued message (the connection will not be written again).
  virtual void DropPendingWrites() = 0;

  // Tells the peer that nothing more will be sent (it sees end-of-stream after what was sent).
  virtual void ShutdownWrite() = 0;
  // Reads and throws away what the peer sends. Returns false once the peer has closed.
  virtual bool DiscardAvailable() = 0;

  // For a peer that has answered nothing: what in this transport may be keeping our messages from
  // it, where the transport can tell; "" otherwise.
  virtual std::string SilenceHint() const { return {}; }

  // Opaque pointer for the owner (the server keeps its per-connection state here).
  void* user_data = nullptr;
};

}  // namespace optcast::transport
