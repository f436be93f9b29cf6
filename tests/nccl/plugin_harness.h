// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Loads the built libnccl-net-optcast.so the way NCCL does (dlopen + dlsym of the versioned
// tables) and offers what a test needs to play NCCL: a logger that records lines, polling
// helpers, and reduction servers on threads of this process.

#include <dlfcn.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl_abi.h"
#include "server/server.h"

#ifndef OPTCAST_NCCL_PLUGIN_PATH
#error "OPTCAST_NCCL_PLUGIN_PATH must name the built libnccl-net-optcast.so"
#endif

namespace optcast::nccl::test {

// dlopen(plugin) once per process; the handle stays open.
void* PluginHandle();

// The table named `symbol` ("ncclNetPlugin_v11", ...), or null.
template <typename T>
T* Table(const char* symbol) {
  return static_cast<T*>(dlsym(PluginHandle(), symbol));
}

// A logger with NCCL's signature. Lines are kept (tools/nccl_driver/plugin_log.h, as the bench's
// plugin driver keeps them), and printed when OPTCAST_TEST_VERBOSE is set.
void TestLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);
std::vector<std::string> LoggedLines();
bool Logged(const std::string& needle);

// Calls `step` until it returns true or `limit` passes; false on timeout.
bool PollUntil(const std::function<bool()>& step, std::chrono::milliseconds limit = std::chrono::seconds(30));

// Reduction servers on 127.0.0.1, each on its own thread.
class LocalServers {
 public:
  explicit LocalServers(int n);
  ~LocalServers();
  LocalServers(const LocalServers&) = delete;
  LocalServers& operator=(const LocalServers&) = delete;
  // "127.0.0.1:p1,127.0.0.1:p2"
  const std::string& addresses() const { return addresses_; }

 private:
  std::vector<std::unique_ptr<server::Server>> servers_;
  std::vector<std::thread> threads_;
  std::string addresses_;
};

}  // namespace optcast::nccl::test
