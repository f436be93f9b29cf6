// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/upstream_link.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace optcast::server {

Status ResolveParent(const transport::Endpoint& parent, std::vector<ParentAddress>* out) {
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
  out->clear();
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    ParentAddress a;
    a.family = ai->ai_family;
    a.socktype = ai->ai_socktype;
    a.protocol = ai->ai_protocol;
    std::memcpy(&a.addr, ai->ai_addr, ai->ai_addrlen);
    a.len = ai->ai_addrlen;
    out->push_back(a);
  }
  freeaddrinfo(res);
  if (out->empty()) {
    return Status(Code::kUnavailable, fmt::format("the upstream server {} resolved to no address", parent.ToString()));
  }
  return Status::Ok();
}

Status StartConnect(const transport::Endpoint& parent, const std::vector<ParentAddress>& addrs,
                    transport::posix::Socket* out) {
  std::string last = "no address";
  for (const ParentAddress& a : addrs) {
    transport::posix::Socket s(::socket(a.family, a.socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a.protocol));
    if (!s.valid()) {
      last = std::string("socket(): ") + std::strerror(errno);
      continue;
    }
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 0 || errno == EINPROGRESS) {
      OPTCAST_RETURN_IF_ERROR(transport::posix::ConfigureDataSocket(s.fd(), true));
      *out = std::move(s);
      return Status::Ok();
    }
    last = std::strerror(errno);
  }
  return Status(Code::kUnavailable, fmt::format("connect to {}: {}", parent.ToString(), last));
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
