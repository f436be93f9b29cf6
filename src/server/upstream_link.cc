// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/upstream_link.h"

#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>

#include <utility>

namespace optcast::server {

Status ResolveParent(const transport::Endpoint& parent, transport::Endpoint* numeric) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(parent.port);
  if (int rc = getaddrinfo(parent.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Status(Code::kUnavailable,
                  fmt::format("cannot resolve the upstream server {}: {}; fix --upstream or the topology file, or "
                              "start this server once the name resolves",
                              parent.ToString(), gai_strerror(rc)));
  }
  char host[NI_MAXHOST] = {};
  const int rc = res != nullptr
                     ? getnameinfo(res->ai_addr, res->ai_addrlen, host, sizeof(host), nullptr, 0, NI_NUMERICHOST)
                     : EAI_NONAME;
  if (res != nullptr) freeaddrinfo(res);
  if (rc != 0) {
    return Status(Code::kUnavailable, fmt::format("the upstream server {} resolved to no address", parent.ToString()));
  }
  *numeric = transport::Endpoint{host, parent.port};
  return Status::Ok();
}

UpstreamLink::UpstreamLink(std::string parent, std::string secret, const wire::Hello& hello)
    : parent_(std::move(parent)),
      join_(hello, std::move(secret), "the upstream server " + parent_, "this server",
            "this server has no secret: give every server of the tree the same --secret-file") {}

transport::OutMessage UpstreamLink::HelloMessage() const {
  return transport::MakeOutMessage(join_.HelloMeta(), nullptr, 0);
}

Status UpstreamLink::OnHandshake(const wire::Message& msg, std::vector<transport::OutMessage>* reply) {
  std::vector<uint8_t> next;
  OPTCAST_RETURN_IF_ERROR(join_.OnMessage(msg, &next));
  if (!next.empty()) reply->push_back(transport::MakeOutMessage(next, nullptr, 0));
  return Status::Ok();
}

}  // namespace optcast::server
