// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Two ends of one ofi connection over loopback, and a handler that collects what one delivers,
// for the ofi suites.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "optcast/status.h"
#include "tests/support/message_collector.h"
#include "transport/connection.h"
#include "transport/listener.h"
#include "transport/message.h"

namespace optcast::transport {

struct Pair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> client, server;
};

// A client dialling (on a thread: the address exchange waits for the server) and the server's end.
Status MakePair(Pair* p, uint64_t client_max = 1u << 30, uint64_t server_max = 1u << 30);

}  // namespace optcast::transport
