// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The joining side of a connection's opening (docs/protocol.md): the hello, the proof of the
// deployment secret when the server challenges, then the welcome or the server's error. A rank
// joining a server (the client library) and a server joining its parent's job (docs/tree.md)
// open their connections the same way, so both drive this one state machine. It only turns the
// server's answers into the next message: the caller moves the bytes, the client in a blocking
// exchange, a server from its event loop.

#include <cstdint>
#include <string>
#include <vector>

#include "optcast/status.h"
#include "wire/protocol.h"

namespace optcast::auth {

class JoinHandshake {
 public:
  // `peer` names the server in errors ("server 10.0.0.1:8918"); `member` names who joins
  // ("rank 3"); `secret_fix` tells how to give this side the secret when a server demands one.
  JoinHandshake(const wire::Hello& hello, std::string secret, std::string peer, std::string member,
                std::string secret_fix);

  const wire::Hello& hello() const { return hello_; }
  // The meta of the first message on the connection.
  std::vector<uint8_t> HelloMeta() const { return wire::EncodeHello(hello_); }

  // Takes the server's answer. Ok and a non-empty *reply: send it (the proof) and wait for the
  // next answer. Ok and welcomed(): joined. An error: the join failed: the server refused it
  // (its code and reason), challenged a side without a secret, or answered out of turn.
  Status OnMessage(const wire::Message& msg, std::vector<uint8_t>* reply);

  bool welcomed() const { return welcomed_; }
  // The largest payload the server takes in one message (from its welcome).
  uint64_t max_payload() const { return max_payload_; }
  // The server is part of an aggregation tree (wire::kWelcomeInTree).
  bool in_tree() const { return in_tree_; }
  // The rate of the server's port in bit/s (from its welcome; 0: unknown).
  uint64_t link_rate_bits() const { return link_rate_bits_; }
  // The server's lanes (from its welcome), each joined on a connection of its own.
  uint32_t lanes() const { return lanes_; }

 private:
  wire::Hello hello_;
  std::string secret_;
  std::string peer_;
  std::string member_;
  std::string secret_fix_;
  bool challenged_ = false;
  bool welcomed_ = false;
  uint64_t max_payload_ = 0;
  bool in_tree_ = false;
  uint64_t link_rate_bits_ = 0;
  uint32_t lanes_ = 1;
};

}  // namespace optcast::auth
