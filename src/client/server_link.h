// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A client's link to one reduction server: its connection, the chunks queued for it and those in
// flight (the send window), the result it is receiving, and what failover needs to know of it.

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/request.h"
#include "client/send_window.h"
#include "common/env.h"
#include "transport/connection.h"
#include "wire/protocol.h"

namespace optcast::client {

// A collective's chunks still to be sent to one server.
struct PendingSends {
  Request* req;
  wire::CollDesc desc;
  std::vector<wire::ChunkRef> chunks;
  size_t next = 0;
  std::vector<uint8_t> flags;  // per chunk (wire::kChunkResultCopy...), or empty: none
};

// One per (server, lane): a server of k lanes (wire::Welcome::lanes) has k links, and
// everything keyed by a link's index (striping, failover's server places, stall queries) sees
// its lanes as servers.
struct ServerLink {
  size_t index = 0;
  size_t server = 0;  // the server's place in CommunicatorOptions::servers
  uint32_t lane = 0;
  bool failed = false;
  std::string address;
  std::unique_ptr<transport::Connection> conn;
  uint64_t max_payload = 0;
  SendWindow window;  // chunks sent whose result/ack has not come back, and how many may be
  std::deque<PendingSends> queue;
  Request* rx_req = nullptr;
  bool rx_credit = false;
  uint64_t rx_bytes = 0;
  uint64_t rx_first = 0;  // the receive buffer's element the arriving result starts at
  uint32_t rx_elems = 0;
  // Tracing: this link's track, when the result being received began, when the last send ended.
  int trace_track = 0;     // results arriving
  int trace_track_tx = 0;  // chunks leaving (overlaps the other in time)
  double rx_start_us = 0;
  double tx_free_us = 0;
  // Failover: the piece whose result is arriving, and when the server was last heard from while
  // this rank waited on it.
  size_t rx_piece = SIZE_MAX;
  bool rx_stale = false;      // the result arriving belongs to stripes a failover replaced
  bool rx_into_copy = false;  // it lands in the request's kept copy, and reaches the caller's buffer whole
  Clock::time_point last_heard = Clock::now();
  bool busy = false;
  // The last failover the server applied (it says so in an Epoch message): answers it sent
  // before that may still belong to stripes the failover replaced.
  uint32_t server_epoch = 0;
  std::vector<uint8_t> sink;  // where results nobody needs any more land
  // Aggregation tree: the job dropped this server's tree while its connection still worked; the
  // server was told, and what it sends is thrown away until it closes (LoseServer).
  bool leaving = false;
  // What the server sent right behind its welcome (JoinedServer::early), handled first.
  std::vector<std::vector<uint8_t>> early;

  // Queues a message without payload (a control message) on the connection.
  void SendControl(std::span<const uint8_t> meta);
  // What poll() should wait for on this link; a failed link waits for nothing (fd -1).
  pollfd PollEntry() const;
  // Points `*dst` at a place for `bytes` that nobody reads (an answer no longer wanted).
  void LandInSink(uint64_t bytes, uint8_t** dst);
  // Sends `bye` and flushes it for up to `wait`, so the server retires the job quietly.
  void SayGoodbye(std::span<const uint8_t> bye, std::chrono::milliseconds wait);
};

// The indexes of the links of `links` not in the bit mask `dead`.
std::vector<uint32_t> ServersLeft(size_t links, uint64_t dead);

}  // namespace optcast::client
