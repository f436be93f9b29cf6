// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <memory>
#include <string>

#include "transport/endpoint.h"
#include "transport/listener.h"
#include "transport/options.h"
#include "transport/posix/socket.h"

namespace optcast::transport::tcp {

// A non-blocking listening socket whose connections are StreamConnections, set up with `options`
// (their congestion control: posix::ApplyCongestionControl, "" the data connections' default).
class StreamListener final : public Listener {
 public:
  static Status Open(const Endpoint& ep, std::unique_ptr<Listener>* out, const TcpOptions& options = {});
  int fd() const override { return socket_.fd(); }
  uint16_t port() const override { return port_; }
  std::string Describe() const override { return "tcp"; }
  Status Accept(uint64_t max_payload, std::unique_ptr<Connection>* out) override;

 private:
  posix::Socket socket_;
  uint16_t port_ = 0;
  TcpOptions options_;
};

}  // namespace optcast::transport::tcp
