// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The rate of the network interface a listener serves, as the kernel reports it
// (/sys/class/net/IF/speed), for servers that announce their port's rate (docs/protocol.md).

#include <cstdint>
#include <string>

namespace optcast::transport::posix {

struct InterfaceRate {
  uint64_t bits = 0;      // bit/s each way; 0 when no interface reported a speed
  std::string interface;  // whose speed it is (empty when none)
};

// For a listener on `host` (an IPv4 or IPv6 literal): the speed of the interface holding that
// address; for a wildcard address ("0.0.0.0", "::"), the fastest interface that is up and not
// loopback, since a data network is the fastest a host has. Loopback, virtual interfaces that
// report no speed, and names that are not address literals give 0.
InterfaceRate RateOfInterfaceFor(const std::string& host);

// "/sys/class/net/<interface>/speed" holds Mbit/s, or -1, or cannot be read: bit/s or 0.
uint64_t ParseSysfsSpeed(const std::string& text);

}  // namespace optcast::transport::posix
