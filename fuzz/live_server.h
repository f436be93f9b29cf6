// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// One live server::Server per fuzz process, serving on its own thread until the process exits.
//
// At exit the server is stopped and its thread joined before the logger and libcrypto are torn
// down: a loop still running then would log into a freed logger (ASan reports that as a crash of
// the last input).
#pragma once

#include <openssl/crypto.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "common/log.h"
#include "frames.h"
#include "server/server.h"

namespace optcast::fuzz {

class LiveServer {
 public:
  // Starts the server (once); later calls return the same one.
  static server::Server& Start(const server::ServerOptions& options) {
    static LiveServer* live = nullptr;
    if (live == nullptr) {
      // Exit handlers run in reverse order of registration: the logger and OpenSSL register
      // theirs first, so that they run after the server has stopped. OpenSSL loads its
      // configuration here, on the main thread: loaded first on the server's thread, it leaves
      // that thread's error state behind at exit.
      Log();
      OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, nullptr);
      live = new LiveServer(options);
      std::atexit([] { live->StopAndJoin(); });
    }
    return live->server_;
  }

 private:
  explicit LiveServer(const server::ServerOptions& options) : server_(options) {
    Status st = server_.Start();
    FUZZ_CHECK(st.ok(), "server start: %s", st.message().c_str());
    loop_ = std::thread([this] {
      Status run = server_.Run();
      FUZZ_CHECK(stopping_.load(), "server loop ended: %s", run.message().c_str());
    });
  }

  void StopAndJoin() {
    stopping_.store(true);
    server_.Stop();
    loop_.join();
  }

  server::Server server_;
  std::atomic<bool> stopping_{false};
  std::thread loop_;
};

}  // namespace optcast::fuzz
