// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

namespace optcast::transport {

// The class of service a message asks for (OutMessage::traffic_class). Each transport maps it its
// own way: tcp marks kLatency with TcpOptions::latency_dscp and kBulk with the default class
// (posix/traffic_class.h); ofi ignores it.
enum class TrafficClass {
  kUnchanged,  // whichever class the connection uses now: control messages, which should not
               // move a connection between classes
  kBulk,       // bandwidth-bound traffic
  kLatency,    // latency-bound collectives, ahead of bulk where the network honours it
};

}  // namespace optcast::transport
