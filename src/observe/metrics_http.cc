// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "observe/metrics_http.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace optcast::observe {

MetricsHttpServer::MetricsHttpServer(const Registry& registry) : registry_(registry) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

Status MetricsHttpServer::Start(const transport::Endpoint& listen) {
  if (http_) return InvalidArgument("the metrics endpoint is already serving");
  http_ = std::make_unique<httplib::Server>();
  // Scrapes are rare and small: two handler threads, not one per core.
  http_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which would let a second server
  // share the port silently instead of failing to start.
  http_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http_->set_read_timeout(5, 0);
  http_->set_write_timeout(5, 0);
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Optcast reduction server. Metrics: /metrics\n", "text/plain");
  });
  errno = 0;
  int port = listen.port;
  if (port == 0) {
    port = http_->bind_to_any_port(listen.host);
    if (port < 0) port = 0;
  } else if (!http_->bind_to_port(listen.host, port)) {
    port = 0;
  }
  if (port == 0) {
    const int err = errno;
    http_.reset();
    return UnavailableError(fmt::format("cannot listen for metrics on {}: {}; pick a free port with --metrics-listen",
                                        listen.ToString(), err ? std::strerror(err) : "bind failed"));
  }
  port_ = static_cast<uint16_t>(port);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  // stop() is a no-op until the loop runs, so wait for it: a Stop() right after Start() must work.
  for (int i = 0; i < 2000 && !http_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!http_->is_running()) {
    Stop();
    return InternalError("the metrics HTTP server did not start within 2 s");
  }
  return Status::Ok();
}

void MetricsHttpServer::Stop() {
  if (!http_) return;
  http_->stop();
  if (thread_.joinable()) thread_.join();
  http_.reset();
}

}  // namespace optcast::observe
