// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/upstream_link.h"

#include <fmt/format.h>

#include "auth/proof.h"

namespace optcast::server {

transport::OutMessage UpstreamLink::HelloMessage() const {
  return transport::MakeOutMessage(wire::EncodeHello(hello_), nullptr, 0);
}

Status UpstreamLink::OnHandshake(const wire::Message& msg, std::vector<transport::OutMessage>* reply) {
  if (welcomed_) return ProtocolError("the upstream server sent a second welcome or challenge");
  if (msg.type == wire::MsgType::kChallenge) {
    if (challenged_) return ProtocolError("the upstream server sent a second challenge");
    if (secret_.empty()) {
      return Status(Code::kUnauthenticated,
                    fmt::format("the upstream server {} requires authentication but this server has no secret; give "
                                "every server of the tree the same --secret-file",
                                parent_));
    }
    challenged_ = true;
    const wire::Mac mac = auth::ComputeProof(secret_, msg.challenge, hello_);
    reply->push_back(transport::MakeOutMessage(wire::EncodeProof(mac), nullptr, 0));
    return Status::Ok();
  }
  if (msg.type == wire::MsgType::kWelcome) {
    welcomed_ = true;
    max_payload_ = msg.welcome.max_payload;
    return Status::Ok();
  }
  return ProtocolError(fmt::format("the upstream server {} sent message type {} before its welcome", parent_,
                                   static_cast<int>(msg.type)));
}

}  // namespace optcast::server
