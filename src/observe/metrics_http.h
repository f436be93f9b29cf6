// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Serves a metrics registry over HTTP for Prometheus to scrape (GET /metrics), on a thread of its
// own so a scrape never stalls the data path. cpp-httplib does the HTTP.

#include <cstdint>
#include <memory>
#include <thread>

#include "observe/metrics.h"
#include "optcast/status.h"
#include "transport/endpoint.h"

namespace httplib {
class Server;
}

namespace optcast::observe {

class MetricsHttpServer {
 public:
  explicit MetricsHttpServer(const Registry& registry);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds `listen` (port 0 picks one) and starts serving. The error names the address.
  Status Start(const transport::Endpoint& listen);
  uint16_t port() const { return port_; }
  void Stop();

 private:
  const Registry& registry_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace optcast::observe
