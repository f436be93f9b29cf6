// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A server's membership in its parent's job (docs/tree.md): the hello that joins the parent as
// one member, the answer to the parent's challenge (the same deployment secret as the workers'),
// and the messages held back until the parent's welcome.

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "auth/handshake.h"
#include "optcast/status.h"
#include "transport/endpoint.h"
#include "transport/message.h"
#include "wire/protocol.h"

namespace optcast::server {

// Looks the parent's name up once, when the server starts: a lookup can block for seconds, and
// the event loop, which opens a connection upstream for every new job, must never wait on one.
// *numeric is the parent with the first address its name resolved to.
Status ResolveParent(const transport::Endpoint& parent, transport::Endpoint* numeric);

class UpstreamLink {
 public:
  UpstreamLink(std::string parent, std::string secret, const wire::Hello& hello);

  const std::string& parent() const { return parent_; }
  const wire::Hello& hello() const { return join_.hello(); }
  bool welcomed() const { return join_.welcomed(); }
  uint64_t max_payload() const { return join_.max_payload(); }

  // The first message on the connection.
  transport::OutMessage HelloMessage() const;

  // Handles the parent's Challenge or Welcome; `reply` gets the proof to send, if any. Anything
  // else before the welcome is a protocol error.
  Status OnHandshake(const wire::Message& msg, std::vector<transport::OutMessage>* reply);

  // Messages to the parent wait here until the welcome.
  void Hold(transport::OutMessage msg) { held_.push_back(std::move(msg)); }
  std::deque<transport::OutMessage> TakeHeld() { return std::exchange(held_, {}); }

  // The job ended before the parent's welcome: the farewell (Bye or Error) is held, and the
  // connection closes once it is sent, so that the parent learns why instead of waiting.
  void CloseAfterWelcome() { close_after_welcome_ = true; }
  bool close_after_welcome() const { return close_after_welcome_; }

 private:
  std::string parent_;
  // The same opening as a rank's (hello, challenge and proof, welcome), driven from the loop.
  auth::JoinHandshake join_;
  bool close_after_welcome_ = false;
  std::deque<transport::OutMessage> held_;
};

}  // namespace optcast::server
