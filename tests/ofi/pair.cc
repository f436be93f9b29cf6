// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "pair.h"

#include <chrono>
#include <thread>

#include "transport/factory.h"

namespace optcast::transport {

Status MakePair(Pair* p, uint64_t client_max, uint64_t server_max) {
  using std::chrono::milliseconds;
  OPTCAST_RETURN_IF_ERROR(Listen(TransportOptions{Kind::kOfi}, {"127.0.0.1", 0}, &p->listener));
  Status dialled;
  std::thread dial([&] {
    dialled = Dial(TransportOptions{Kind::kOfi}, {"127.0.0.1", p->listener->port()},
                   Deadline::After(milliseconds(5000)), client_max, &p->client);
  });
  Status accepted = UnavailableError("nobody connected");
  const auto until = std::chrono::steady_clock::now() + milliseconds(5000);
  while (std::chrono::steady_clock::now() < until) {
    accepted = p->listener->Accept(server_max, &p->server);
    if (accepted.code() != Code::kUnavailable || p->server) break;
    std::this_thread::sleep_for(milliseconds(2));
  }
  dial.join();
  OPTCAST_RETURN_IF_ERROR(dialled);
  return accepted;
}

}  // namespace optcast::transport
