// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The DSCP a TCP socket marks its packets with, switched per message (OutMessage::dscp).
//
// A small collective next to a stream of large ones waits behind the stream's bytes in every
// queue the two share: the switch port into a server, the server's own egress. Those bytes are
// the stream's window, which it needs for its bandwidth, so no flow control on the stream's side
// removes the wait (docs/benchmarks.md, "A small job next to a stream"). Networks that give a
// DSCP its own queue ahead of bulk traffic can: the latency-bound messages go out marked, the
// rest unmarked.
//
// Switching a connection's class reorders its bytes in the network when the later ones take a
// faster queue than earlier ones still in flight, which TCP reads as loss. So a connection moves
// to a marked class only when it has nothing unacknowledged, and back to the default class at
// once (its later bytes then queue behind, never ahead of, the earlier ones).

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
  bool Set(uint8_t dscp);

  int fd_;
  uint8_t current_ = 0;
  int family_ = -1;  // AF_INET or AF_INET6 once known; 0: marking is off for this socket
};

// A DSCP from a setting: 0-63, or "off" (0, the default class). The error names `what`.
Status ParseDscp(const std::string& text, const std::string& what, int* out);

// Bytes the socket has written but the peer has not acknowledged (SIOCOUTQ), or -1.
int64_t UnacknowledgedBytes(int fd);

}  // namespace optcast::transport::posix
