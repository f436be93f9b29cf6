// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/posix/traffic_class.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>

namespace optcast::transport::posix {

Status ParseDscp(const std::string& text, const std::string& what, int* out) {
  if (text == "off") {
    *out = 0;
    return Status::Ok();
  }
  const bool digits = !text.empty() && text.size() <= 2 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const long v = digits ? std::strtol(text.c_str(), nullptr, 10) : -1;
  if (v < 0 || v > kMaxDscp) {
    return InvalidArgument(what + "='" + text + "' is not a DSCP; write 0-63 (46: Expedited Forwarding) or off");
  }
  *out = static_cast<int>(v);
  return Status::Ok();
}

int64_t UnacknowledgedBytes(int fd) {
  int bytes = 0;
  if (::ioctl(fd, SIOCOUTQ, &bytes) != 0) return -1;
  return bytes;
}

void TrafficClass::Set(uint8_t dscp) {
  if (family_ < 0) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    family_ = ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0 ? addr.ss_family : 0;
    if (family_ != AF_INET && family_ != AF_INET6) family_ = 0;
  }
  if (family_ == 0) return;
  // The two low bits are ECN, which the kernel keeps for TCP whatever is written here.
  const int tos = dscp << 2;
  int rc = ::setsockopt(fd_, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
  if (family_ == AF_INET6) {
    // An IPv6 socket's IPv4 peers (v4-mapped, on a dual-stack listener) take IP_TOS, the rest
    // IPV6_TCLASS: set both, and fail only if the one that applies fails.
    const int rc6 = ::setsockopt(fd_, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
    rc = rc6 == 0 || rc == 0 ? 0 : rc6;
  }
  if (rc != 0) {
    family_ = 0;  // not permitted here: the default class from now on
    return;
  }
  current_ = dscp;
}

void TrafficClass::Prepare(uint8_t dscp) {
  if (dscp == current_ || family_ == 0) return;
  if (dscp != 0 && UnacknowledgedBytes(fd_) != 0) return;  // would overtake bytes still in flight
  Set(dscp);
}

}  // namespace optcast::transport::posix
