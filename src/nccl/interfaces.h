// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Which network interfaces the plugin offers to NCCL as devices, chosen like NCCL's own socket
// transport: OPTCAST_SOCKET_IFNAME, else NCCL_SOCKET_IFNAME, else the first interface that is up
// and not loopback (docker bridges skipped), else loopback.

#include <sys/socket.h>

#include <string>
#include <string_view>
#include <vector>

namespace optcast::nccl {

// An NCCL_SOCKET_IFNAME-style list: "eth,ib" (prefixes), "^docker,lo" (exclude prefixes),
// "=eth0" (exact names), "^=eth0" (exclude exact names). ":port" suffixes are ignored.
class InterfaceFilter {
 public:
  static InterfaceFilter Parse(std::string_view spec);
  bool Matches(std::string_view ifname) const;

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

struct NetInterface {
  std::string name;         // "eth0"
  sockaddr_storage addr{};  // an address of the interface (IPv4 preferred), port 0
  socklen_t addr_len = 0;
  std::string address;   // printable form of addr
  std::string pci_path;  // realpath of /sys/class/net/<name>/device; empty when there is none
  int speed_mbps = 0;    // from /sys/class/net/<name>/speed; 10000 when unknown
  bool loopback = false;
};

// Lists the candidate interfaces of this host (up, with an address), in kernel order.
std::vector<NetInterface> ListInterfaces();

// Applies the selection rules to `all`. `how` says which rule chose them, for the log.
std::vector<NetInterface> SelectInterfaces(const std::vector<NetInterface>& all, std::string* how);

// The process-wide selection, computed once.
const std::vector<NetInterface>& Devices();

}  // namespace optcast::nccl
