// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/transport_options.h"

namespace optcast::client {

transport::TransportOptions TransportOptionsFor(const CommunicatorOptions& o, transport::Kind kind) {
  transport::TransportOptions t;
  t.kind = kind;
  t.tcp.congestion = o.tcp_congestion;
  t.tcp.latency_dscp = o.latency_dscp;
  return t;
}

}  // namespace optcast::client
