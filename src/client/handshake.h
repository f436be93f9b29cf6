// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Joining a job on one reduction server: dial, hello, the challenge and proof when the server
// requires authentication, and the welcome (docs/protocol.md). Done once per server link, before
// the connection carries any collective.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "optcast/communicator.h"
#include "optcast/status.h"
#include "transport/connection.h"
#include "transport/dialer.h"

namespace optcast::client {

// A connection the server has welcomed into the job.
struct JoinedServer {
  std::string address;  // the endpoint as dialed, for messages
  uint64_t max_payload = 0;
  bool in_tree = false;         // the server is part of an aggregation tree
  uint64_t link_rate_bits = 0;  // the server's port rate, bit/s (0: unknown)
  uint32_t lanes = 1;           // the server's lanes (wire::Welcome::lanes)
  std::unique_ptr<transport::Connection> conn;
  // Messages that arrived right behind the welcome, in order (payload-free: the rank has sent no
  // chunk yet). A transport may hand several messages to one read, and one of them may be the
  // job's failure: the caller handles them before anything it reads later.
  std::vector<std::vector<uint8_t>> early;
};

// Dials `server` ("host:port") within connect_deadline and joins the job of `opts` on its lane
// `lane` as opts.rank. Errors name the server and, where the server refused, carry its code and
// reason.
Status JoinServer(transport::Dialer& dialer, const std::string& server, uint32_t lane, const CommunicatorOptions& opts,
                  Deadline connect_deadline, JoinedServer* out);

}  // namespace optcast::client
