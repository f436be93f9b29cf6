// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "transport/endpoint.h"
#include "transport/listener.h"
#include "transport/ofi/fabric.h"
#include "transport/posix/socket.h"

namespace optcast::transport::ofi {

// Accepts ofi connections: the address exchange (address.h) over a TCP listening socket, then a
// FabricConnection per client. fd() is an epoll descriptor over the listening socket and the
// sockets of clients whose addresses have not fully arrived, so that a slow client never holds up
// the server's loop.
class FabricListener final : public Listener {
 public:
  // `provider` "" takes RequestedProvider().
  static Status Open(const Endpoint& ep, const std::string& provider, std::unique_ptr<Listener>* out);
  ~FabricListener() override;
  int fd() const override { return epfd_; }
  uint16_t port() const override { return port_; }
  std::string Describe() const override { return "ofi (provider " + fabric_->provider() + ")"; }
  Status Accept(uint64_t max_payload, std::unique_ptr<Connection>* out) override;
  const Fabric& fabric() const { return *fabric_; }

 private:
  // A client whose address is still arriving.
  struct Pending {
    posix::Socket socket;
    std::string peer;
    std::vector<uint8_t> bytes;
    Clock::time_point since;
  };
  // Reads what a pending client sent; true once its exchange is over (well or not).
  bool Advance(Pending& p, uint64_t max_payload, std::unique_ptr<Connection>* out, Status* st);

  posix::Socket socket_;
  int epfd_ = -1;
  uint16_t port_ = 0;
  std::shared_ptr<Fabric> fabric_;
  std::vector<std::unique_ptr<Pending>> pending_;
};

}  // namespace optcast::transport::ofi
