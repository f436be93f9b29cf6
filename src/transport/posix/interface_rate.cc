// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/posix/interface_rate.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace optcast::transport::posix {
namespace {

uint64_t SpeedOf(const std::string& interface) {
  std::ifstream in("/sys/class/net/" + interface + "/speed");
  if (!in) return 0;
  std::stringstream text;
  text << in.rdbuf();  // reading fails (EINVAL) on interfaces without a speed: empty text
  return ParseSysfsSpeed(text.str());
}

bool SameAddress(const sockaddr* sa, const std::string& host) {
  if (sa->sa_family == AF_INET) {
    in_addr want{};
    if (inet_pton(AF_INET, host.c_str(), &want) != 1) return false;
    return std::memcmp(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, &want, sizeof(want)) == 0;
  }
  if (sa->sa_family == AF_INET6) {
    in6_addr want{};
    if (inet_pton(AF_INET6, host.c_str(), &want) != 1) return false;
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, &want, sizeof(want)) == 0;
  }
  return false;
}

}  // namespace

uint64_t ParseSysfsSpeed(const std::string& text) {
  char* end = nullptr;
  const long long mbit = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || mbit <= 0) return 0;
  return static_cast<uint64_t>(mbit) * 1'000'000;
}

InterfaceRate RateOfInterfaceFor(const std::string& host) {
  InterfaceRate best;
  const bool wildcard = host.empty() || host == "0.0.0.0" || host == "::";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return best;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0 || (ifa->ifa_flags & IFF_LOOPBACK) != 0) continue;
    if (!wildcard && !SameAddress(ifa->ifa_addr, host)) continue;
    const uint64_t bits = SpeedOf(ifa->ifa_name);
    if (bits > best.bits) best = InterfaceRate{bits, ifa->ifa_name};
    if (!wildcard) break;
  }
  freeifaddrs(list);
  return best;
}

}  // namespace optcast::transport::posix
