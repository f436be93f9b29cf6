// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "nccl/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "common/env.h"
#include "nccl/logging.h"

namespace optcast::nccl {

namespace {

constexpr int kDefaultSpeedMbps = 10000;
constexpr size_t kMaxDevices = 16;

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string PciPath(const std::string& ifname) {
  const std::string link = "/sys/class/net/" + ifname + "/device";
  char resolved[PATH_MAX];
  if (::realpath(link.c_str(), resolved) == nullptr) return "";
  return resolved;
}

int SpeedMbps(const std::string& ifname) {
  std::ifstream in("/sys/class/net/" + ifname + "/speed");
  long speed = 0;
  // Virtual interfaces report -1 or fail the read (EINVAL); NCCL wants a positive figure.
  if (!(in >> speed) || speed <= 0 || speed > INT_MAX) return kDefaultSpeedMbps;
  return static_cast<int>(speed);
}

std::string AddressText(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof(text));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace

InterfaceFilter InterfaceFilter::Parse(std::string_view spec) {
  InterfaceFilter f;
  if (!spec.empty() && spec.front() == '^') {
    f.exclude_ = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    f.exact_ = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    item = item.substr(0, item.find(':'));  // NCCL allows "eth0:port"
    if (!item.empty()) f.names_.emplace_back(item);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return f;
}

bool InterfaceFilter::Matches(std::string_view ifname) const {
  bool listed = false;
  for (const std::string& n : names_) {
    if (exact_ ? ifname == n : StartsWith(ifname, n)) {
      listed = true;
      break;
    }
  }
  return exclude_ ? !listed : listed;
}

std::vector<NetInterface> ListInterfaces() {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  // Two passes so that an interface with both families is listed with its IPv4 address; IPv6
  // link-local addresses are skipped because they need a scope to be reachable.
  for (int pass = 0; pass < 2; ++pass) {
    const int family = pass == 0 ? AF_INET : AF_INET6;
    for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
      if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != family) continue;
      if (!(ifa->ifa_flags & IFF_UP)) continue;
      if (family == AF_INET6 &&
          IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr)) {
        continue;
      }
      bool known = false;
      for (const auto& i : out) known = known || i.name == ifa->ifa_name;
      if (known) continue;
      NetInterface i;
      i.name = ifa->ifa_name;
      i.addr_len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      std::memcpy(&i.addr, ifa->ifa_addr, i.addr_len);
      i.address = AddressText(ifa->ifa_addr);
      i.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
      out.push_back(std::move(i));
    }
  }
  freeifaddrs(list);
  for (auto& i : out) {
    i.pci_path = PciPath(i.name);
    i.speed_mbps = SpeedMbps(i.name);
  }
  return out;
}

std::vector<NetInterface> SelectInterfaces(const std::vector<NetInterface>& all, std::string* how) {
  std::vector<NetInterface> chosen;
  const char* var = "OPTCAST_SOCKET_IFNAME";
  auto spec = GetEnv(var);
  if (!spec) {
    var = "NCCL_SOCKET_IFNAME";
    spec = GetEnv(var);
  }
  if (spec) {
    const InterfaceFilter filter = InterfaceFilter::Parse(*spec);
    for (const auto& i : all) {
      if (filter.Matches(i.name) && chosen.size() < kMaxDevices) chosen.push_back(i);
    }
    *how = std::string(var) + "=" + *spec;
    return chosen;
  }
  for (const auto& i : all) {
    if (!i.loopback && !StartsWith(i.name, "docker")) {
      chosen.push_back(i);
      *how = "first non-loopback interface";
      return chosen;
    }
  }
  for (const auto& i : all) {
    if (i.loopback) {
      chosen.push_back(i);
      *how = "loopback, since no other interface is up";
      return chosen;
    }
  }
  *how = "no interface is up";
  return chosen;
}

const std::vector<NetInterface>& Devices() {
  static const std::vector<NetInterface> devices = [] {
    std::string how;
    std::vector<NetInterface> d = SelectInterfaces(ListInterfaces(), &how);
    if (d.empty()) {
      OPTCAST_NCCL_WARN("no network interface matches ({}); set OPTCAST_SOCKET_IFNAME or NCCL_SOCKET_IFNAME", how);
    }
    for (size_t i = 0; i < d.size(); ++i) {
      OPTCAST_NCCL_INFO(NCCL_INIT | NCCL_NET, "device {}: {} {} speed {} Mbit/s pci {} ({})", i, d[i].name,
                        d[i].address, d[i].speed_mbps, d[i].pci_path.empty() ? "none" : d[i].pci_path, how);
    }
    return d;
  }();
  return devices;
}

}  // namespace optcast::nccl
