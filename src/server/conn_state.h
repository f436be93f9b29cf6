// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <memory>

#include "server/job.h"
#include "transport/connection.h"
#include "wire/protocol.h"

namespace optcast::server {

// Per-connection state. A connection is one rank of one job once it has said hello.
struct ConnState {
  // Where the chunk now arriving lands. A transport that receives straight into memory (ofi) may
  // go on writing there after the job fails and frees its slots, until the message completes or
  // the connection is destroyed; so the buffer is held here, and declared before `conn` so that
  // it outlives the connection.
  std::shared_ptr<uint8_t> rx_dst;
  std::unique_ptr<transport::Connection> conn;
  std::shared_ptr<Job> job;
  uint32_t rank = 0;
  bool closing = false;  // an error was sent: flush, half-close, drain until the peer closes
  bool write_shut = false;
  bool dead = false;   // destroy at the end of this loop iteration
  bool dirty = false;  // has queued writes to flush
  bool want_read = true;
  bool want_write = false;
  Clock::time_point accepted_at = Clock::now();
  Clock::time_point close_by{};
  Clock::time_point heartbeat_at{};  // when the last heartbeat went out
  // A hello waiting for its proof of the deployment secret.
  bool challenged = false;
  // The hello asked for another lane of this server (server/lane.h): once the read that brought
  // it returns, the connection moves to that lane, which answers `pending_hello`.
  int hand_off_lane = -1;
  wire::Hello pending_hello{};
  wire::Nonce nonce{};
  // The chunk whose payload is being received.
  uint64_t rx_seq = 0;
  SlotKey rx_key{};
  uint64_t rx_incarnation = 0;  // CollState::incarnation of the collective it was received for
  bool rx_chunk = false;
  // Tracing: this connection's tracks (receiving, sending; they overlap in time), when its chunk
  // began arriving, when its last send ended.
  int trace_track = 0;
  int trace_track_tx = 0;
  double rx_start_us = 0;
  double tx_free_us = 0;
  // Aggregation tree: this connection is a downstream server of its job (its chunks carry
  // partials), or this server's own link to the parent server for `upstream_of`.
  bool server_member = false;
  // A member said Bye before its connection closed: it left the job, it did not die.
  bool said_bye = false;
  std::shared_ptr<Job> upstream_of;
};

}  // namespace optcast::server
