// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// An `optcast server` child process: started with arguments and environment, its port read from
// what it prints, its memory and descriptors read from /proc.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "optcast/status.h"
#include "tests/support/optcast_binary.h"

namespace optcast::daemon {

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess();  // SIGKILLs and reaps it if still running
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Runs $OPTCAST_BIN server ARGS with extra environment ("NAME=value") and waits up to `limit`
  // for its "optcast server listening on HOST:PORT" line. A server that exits first is an error carrying its output.
  Status Start(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
               std::chrono::milliseconds limit = std::chrono::milliseconds(10000));

  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  void Signal(int sig) const;
  // Waits up to `limit` for the process to exit; false on timeout. Fills the exit code (or
  // 128 + signal) and everything it printed.
  bool Wait(std::chrono::milliseconds limit, int* exit_code);
  // Everything printed so far (stdout and stderr together).
  std::string Output();

  // Resident set size in bytes and number of open descriptors, from /proc.
  uint64_t RssBytes() const;
  int OpenFds() const;

 private:
  void Drain(int timeout_ms);
  pid_t pid_ = -1;
  int out_fd_ = -1;
  uint16_t port_ = 0;
  std::string output_;
};

// The optcast binary under test ($OPTCAST_BIN), or "" when unset.
using testsupport::OptcastBinary;

}  // namespace optcast::daemon
