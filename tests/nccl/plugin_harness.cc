// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "plugin_harness.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "tools/nccl_driver/plugin_log.h"

namespace optcast::nccl::test {

void* PluginHandle() {
  static void* handle = [] {
    void* h = dlopen(OPTCAST_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      std::fprintf(stderr, "dlopen(%s): %s\n", OPTCAST_NCCL_PLUGIN_PATH, dlerror());
      std::abort();
    }
    return h;
  }();
  return handle;
}

void TestLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const std::string text = tools::nccl_driver::FormatPluginLine(level, fmt, ap);
  va_end(ap);
  if (std::getenv("OPTCAST_TEST_VERBOSE") != nullptr) std::fprintf(stderr, "[plugin] %s\n", text.c_str());
  tools::nccl_driver::KeepPluginLine(text);
}

std::vector<std::string> LoggedLines() { return tools::nccl_driver::PluginLines(); }

bool Logged(const std::string& needle) {
  for (const auto& l : LoggedLines()) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

bool PollUntil(const std::function<bool()>& step, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!step()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

LocalServers::LocalServers(int n) {
  for (int i = 0; i < n; ++i) {
    server::ServerOptions opts;
    opts.listen = {"127.0.0.1", 0};
    // The same transport as the plugin's communicators (OPTCAST_TRANSPORT).
    Status kind = transport::KindFromEnvironment(transport::Kind::kTcp, &opts.transport.kind);
    if (!kind.ok()) throw std::runtime_error(kind.ToString());
    auto s = std::make_unique<server::Server>(opts);
    Status st = s->Start();
    if (!st.ok()) throw std::runtime_error("server start: " + st.ToString());
    addresses_ += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(s->port());
    server::Server* raw = s.get();
    threads_.emplace_back([raw] { (void)raw->Run(); });
    servers_.push_back(std::move(s));
  }
}

LocalServers::~LocalServers() {
  for (auto& s : servers_) s->Stop();
  for (auto& t : threads_) t.join();
}

}  // namespace optcast::nccl::test
