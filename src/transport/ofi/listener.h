// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <memory>

#include "transport/connection.h"
#include "transport/endpoint.h"
#include "transport/ofi/fabric.h"
#include "transport/tcp/socket.h"

namespace optcast::transport::ofi {

// Servers stay named by host:port. The server listens on that TCP port; a client connects, sends
// its provider name and fabric address (fi_getname of an endpoint made for this server), and the
// server answers with the same for an endpoint it makes for this client. The TCP connection then
// stays open as the connection's control channel (see FabricConnection); everything else,
// hello and authentication included, goes over the fabric.
//
// Address exchange, both directions: magic u32 "OFAB", provider length u16, address length u16,
// provider name, address. An answer with address length 0 is a refusal whose "provider" field
// holds the reason.
inline constexpr uint32_t kAddressMagic = 0x4241464f;  // "OFAB"

// fd() is an epoll descriptor over the listening socket and the sockets of clients whose
// addresses have not fully arrived, so that a slow client never holds up the server's loop.
class FabricListener final : public Listener {
 public:
  // `provider` "" takes RequestedProvider().
  static Status Open(const Endpoint& ep, const std::string& provider, std::unique_ptr<Listener>* out);
  ~FabricListener() override;
  int fd() const override { return epfd_; }
  uint16_t port() const override { return port_; }
  Status Accept(uint64_t max_payload, std::unique_ptr<Connection>* out) override;
  const Fabric& fabric() const { return *fabric_; }

 private:
  // A client whose address is still arriving.
  struct Pending {
    tcp::Socket socket;
    std::string peer;
    std::vector<uint8_t> bytes;
    Clock::time_point since;
  };
  // Reads what a pending client sent; true once its exchange is over (well or not).
  bool Advance(Pending& p, uint64_t max_payload, std::unique_ptr<Connection>* out, Status* st);

  tcp::Socket socket_;
  int epfd_ = -1;
  uint16_t port_ = 0;
  std::shared_ptr<Fabric> fabric_;
  std::vector<std::unique_ptr<Pending>> pending_;
};

// The local address this machine would use toward `host` (a UDP socket's connect sends
// nothing), so that a fabric binds to the interface the control connection takes; "" if unknown.
std::string LocalHostToward(const std::string& host);

// Connects to a FabricListener through a fabric of its own (the provider comes from
// RequestedProvider()).
Status DialFabric(const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out);
// Connects through `fabric`, which the connection shares with others (and their registrations).
Status DialFabric(std::shared_ptr<Fabric> fabric, const Endpoint& ep, Deadline deadline, uint64_t max_payload,
                  std::unique_ptr<Connection>* out);

}  // namespace optcast::transport::ofi
