// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "auth/handshake.h"

#include <utility>

#include "auth/proof.h"

namespace optcast::auth {

JoinHandshake::JoinHandshake(const wire::Hello& hello, std::string secret, std::string peer, std::string member,
                             std::string secret_fix)
    : hello_(hello),
      secret_(std::move(secret)),
      peer_(std::move(peer)),
      member_(std::move(member)),
      secret_fix_(std::move(secret_fix)) {}

Status JoinHandshake::OnMessage(const wire::Message& msg, std::vector<uint8_t>* reply) {
  reply->clear();
  if (welcomed_) return ProtocolError(peer_ + " sent a second welcome or challenge");
  switch (msg.type) {
    case wire::MsgType::kChallenge:
      if (challenged_) return ProtocolError(peer_ + " sent a second challenge");
      if (secret_.empty()) return Status(Code::kUnauthenticated, peer_ + " requires authentication; " + secret_fix_);
      challenged_ = true;
      // The proof covers the server's fresh nonce and the whole hello: it cannot be replayed.
      *reply = wire::EncodeProof(ComputeProof(secret_, msg.challenge, hello_));
      return Status::Ok();
    case wire::MsgType::kWelcome:
      welcomed_ = true;
      max_payload_ = msg.welcome.max_payload;
      in_tree_ = (msg.welcome.flags & wire::kWelcomeInTree) != 0;
      link_rate_bits_ = msg.welcome.link_rate_bits;
      lanes_ = msg.welcome.lanes;
      return Status::Ok();
    case wire::MsgType::kError: return Status(msg.error.code, peer_ + " refused " + member_ + ": " + msg.error.text);
    default:
      return ProtocolError(peer_ + " answered the hello with message type " +
                           std::to_string(static_cast<int>(msg.type)) + ", not a welcome");
  }
}

}  // namespace optcast::auth
