// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The DSCP a TCP socket marks its packets with, switched per message (OutMessage::traffic_class,
// which tcp::StreamConnection maps to a DSCP).
//
// A small collective next to a stream of large ones waits behind the stream's bytes in every
// queue the two share: the switch port into a server, the server's own egress. Those bytes are
// the stream's window, which it needs for its bandwidth, so no flow control on the stream's side
// removes the wait (docs/benchmarks.md, "A small job next to a stream"). Networks that give a
// DSCP its own queue ahead of bulk traffic can: the latency-bound messages go out marked, the
// rest unmarked.
//
// The kernel marks a segment when it transmits it, with the socket's class at that moment, so a
// switch applies to everything not yet sent. Moving into a marked class while earlier bytes are
// still in flight would let the later ones overtake them in the network, which TCP reads as
// loss: a connection moves to a marked class only when it has nothing unsent or unacknowledged.
// It moves back to the default class at once (later bytes then queue behind, never ahead of,
// earlier ones), which also unmarks the marked bytes it has not sent yet: a small collective
// followed at once by a large one may lose its mark.
//
// On Linux IP_TOS also sets the socket's priority (rt_tos2priority: 46 maps to the "interactive
// bulk" priority), which a host's prio or mqprio qdisc may use.

#include <cstdint>
#include <string>

#include "optcast/status.h"

namespace optcast::transport::posix {

// DSCP values are 6 bits.
inline constexpr int kMaxDscp = 63;

class TrafficClass {
 public:
  explicit TrafficClass(int fd) : fd_(fd) {}

  // Before writing a message to be marked `dscp` (0: the default class). Best effort: a socket
  // that refuses the mark (not IP, not permitted) keeps the default class from then on.
  void Prepare(uint8_t dscp);

  // The DSCP the socket marks with now.
  uint8_t current() const { return current_; }

 private:
  void Set(uint8_t dscp);

  int fd_;
  uint8_t current_ = 0;
  int family_ = -1;  // AF_INET or AF_INET6 once known; 0: marking is off for this socket
};

// A DSCP from a setting: 0-63, or "off" (0, the default class). The error names `what`.
Status ParseDscp(const std::string& text, const std::string& what, int* out);

// Bytes the socket has written but the peer has not acknowledged (SIOCOUTQ), or -1.
int64_t UnacknowledgedBytes(int fd);

}  // namespace optcast::transport::posix
