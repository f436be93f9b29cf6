// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A server scripted on raw loopback sockets, for faults a real server cannot be made to show at
// a chosen moment (a result cut short, a result sent to some ranks only). It speaks just enough of
// the protocol: hello and welcome, reading chunks, sending frames.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "wire/protocol.h"

namespace optcast::e2e {

struct ScriptedChunk {
  wire::CollDesc desc;
  wire::ChunkRef ref;
  std::vector<uint8_t> payload;
};

class ScriptedServer {
 public:
  ScriptedServer() = default;
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;
  ~ScriptedServer();

  // Listens on an ephemeral loopback port.
  bool Listen();
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Runs `script` on a thread of its own; it returns false with `why` set when the ranks did
  // not do what it expected.
  using Script = std::function<bool(ScriptedServer& server, std::string* why)>;
  void Start(Script script);
  // Waits for the script; whether it went as expected, and if not, what happened.
  bool Join();
  const std::string& what() const { return what_; }

  // Accepts `nranks` connections and welcomes each one's hello; conns()[r] is rank r's.
  // `behind_welcome` goes out in the same write, right behind each welcome.
  bool AcceptAndWelcome(int nranks, std::string* why, const std::vector<uint8_t>& behind_welcome = {});
  const std::vector<int>& conns() const { return conns_by_rank_; }
  // The next chunk on `fd` with its payload, skipping other messages.
  bool ReadChunk(int fd, ScriptedChunk* chunk, std::string* why);
  // Reads every rank's chunks of its share of one float32 allreduce (desc.server_elems elements
  // from each) and sums them, by chunk offset.
  bool ReadAndSumShare(std::map<uint64_t, ScriptedChunk>* sums, std::string* why);
  // Sends those sums to rank `rank` as results.
  bool SendResults(int rank, const std::map<uint64_t, ScriptedChunk>& sums, std::string* why);
  // Waits until the peer closes `fd` (EOF or reset) or `timeout_ms` passes.
  bool WaitForClose(int fd, int timeout_ms);
  void CloseAll();

 private:
  std::thread thread_;
  std::atomic<bool> ok_{false};
  std::string what_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<int> conns_by_rank_;
};

}  // namespace optcast::e2e
