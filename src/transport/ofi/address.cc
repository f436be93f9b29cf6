// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/ofi/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "transport/message.h"
#include "transport/posix/socket.h"

namespace optcast::transport::ofi {

Status CheckAddressHead(const uint8_t* h, const std::string& who, size_t* plen, size_t* alen) {
  const uint32_t magic = h[0] | (h[1] << 8) | (h[2] << 16) | (static_cast<uint32_t>(h[3]) << 24);
  if (magic == kFrameMagic) {
    return ProtocolError(who +
                         " uses the built-in tcp transport, not ofi; use the same --transport (or "
                         "OPTCAST_TRANSPORT) on servers and clients");
  }
  if (magic != kAddressMagic) {
    return ProtocolError(who + " did not send a fabric address; is it an Optcast endpoint using the ofi transport?");
  }
  *plen = h[4] | (h[5] << 8);
  *alen = h[6] | (h[7] << 8);
  if (*plen > kMaxAddressField || *alen > kMaxAddressField)
    return ProtocolError(who + " sent an oversized fabric address");
  return Status::Ok();
}

std::vector<uint8_t> EncodeAddress(const std::string& provider, const std::vector<uint8_t>& address) {
  std::vector<uint8_t> msg(8);
  const uint32_t magic = kAddressMagic;
  const uint16_t plen = static_cast<uint16_t>(provider.size());
  const uint16_t alen = static_cast<uint16_t>(address.size());
  for (int i = 0; i < 4; ++i) msg[i] = static_cast<uint8_t>(magic >> (8 * i));
  msg[4] = static_cast<uint8_t>(plen);
  msg[5] = static_cast<uint8_t>(plen >> 8);
  msg[6] = static_cast<uint8_t>(alen);
  msg[7] = static_cast<uint8_t>(alen >> 8);
  msg.insert(msg.end(), provider.begin(), provider.end());
  msg.insert(msg.end(), address.begin(), address.end());
  return msg;
}

Status SendAddress(int fd, const std::string& provider, const std::vector<uint8_t>& address, Deadline d) {
  const std::vector<uint8_t> msg = EncodeAddress(provider, address);
  return posix::SendAll(fd, msg.data(), msg.size(), d);
}

Status RecvAddress(int fd, Deadline d, const std::string& who, std::string* provider, std::vector<uint8_t>* address) {
  uint8_t h[8];
  OPTCAST_RETURN_IF_ERROR(posix::RecvAll(fd, h, sizeof(h), d));
  size_t plen = 0, alen = 0;
  OPTCAST_RETURN_IF_ERROR(CheckAddressHead(h, who, &plen, &alen));
  provider->resize(plen);
  address->resize(alen);
  if (plen > 0) OPTCAST_RETURN_IF_ERROR(posix::RecvAll(fd, provider->data(), plen, d));
  if (alen > 0) OPTCAST_RETURN_IF_ERROR(posix::RecvAll(fd, address->data(), alen, d));
  return Status::Ok();
}

std::string LocalHostToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) return "";
  posix::Socket s(::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const bool ok = s.valid() && ::connect(s.fd(), res->ai_addr, res->ai_addrlen) == 0;
  freeaddrinfo(res);
  if (!ok) return "";
  const int fd = s.fd();
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

}  // namespace optcast::transport::ofi
