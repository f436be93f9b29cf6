// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/server_link.h"

#include <algorithm>

#include "transport/message.h"

namespace optcast::client {

void ServerLink::SendControl(std::span<const uint8_t> meta) { conn->Send(transport::MakeOutMessage(meta, nullptr, 0)); }

pollfd ServerLink::PollEntry() const {
  if (failed) return {-1, 0, 0};
  const bool wants_out = conn->HasPendingWrites() && !conn->WritesSignalReadable();
  return {conn->fd(), static_cast<short>(POLLIN | (wants_out ? POLLOUT : 0)), 0};
}

void ServerLink::LandInSink(uint64_t bytes, uint8_t** dst) {
  sink.resize(std::max<size_t>(bytes, 1));
  *dst = sink.data();
}

void ServerLink::SayGoodbye(std::span<const uint8_t> bye, std::chrono::milliseconds wait) {
  conn->Send(transport::MakeOutMessage(bye, nullptr, 0));
  Deadline d = Deadline::After(wait);
  while (conn->HasPendingWrites() && !d.Expired()) {
    if (!conn->Flush().ok()) break;
    if (conn->HasPendingWrites()) {
      pollfd p{conn->fd(), static_cast<short>(conn->WritesSignalReadable() ? POLLIN : POLLOUT), 0};
      ::poll(&p, 1, 10);
    }
  }
}

std::vector<uint32_t> ServersLeft(size_t links, uint64_t dead) {
  std::vector<uint32_t> alive;
  for (uint32_t i = 0; i < links; ++i) {
    if (((dead >> i) & 1) == 0) alive.push_back(i);
  }
  return alive;
}

}  // namespace optcast::client
