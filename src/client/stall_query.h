// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What a client says when its own timeout fires. The client only knows that no result came; the
// servers it waits on know which ranks have not sent their part. So before it gives up, the
// client asks each of them (a StallQuery), waits a short while for their StallReports, and names
// the ranks in its error, as a server's own job timeout does. A server that does not answer is
// named as possibly stuck itself.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"

namespace optcast::client {

// How long a client waits for the servers' answers after its timeout: long enough for a loaded
// server's event loop, short against any timeout worth setting.
inline constexpr std::chrono::milliseconds kStallAnswerWait{2000};

class StallQuery {
 public:
  struct Server {
    size_t link = 0;
    std::string address;
    // The collective this server is asked about; 0: the one Begin names. A failover re-runs a dead
    // server's share of a collective as a collective of its own (wire::RecoverySeq).
    uint64_t coll_seq = 0;
  };

  bool asked() const { return asked_; }
  uint64_t coll_seq() const { return coll_seq_; }
  // Starts waiting for the answers of `servers` about collective `coll_seq` until `deadline`.
  void Begin(uint64_t coll_seq, std::vector<Server> servers, Clock::time_point deadline);
  // A server's answer; ignored unless it is about the collective that server was asked about.
  void OnReport(size_t link, uint64_t coll_seq, std::string waiting_for);
  // Every server answered, or the deadline passed.
  bool Done(Clock::time_point now) const;
  void Reset() {
    if (asked_) *this = StallQuery();  // called on every progress pass: nothing to do unless asked
  }

  // The clause for the error, e.g. "server h1:8918 is still waiting for rank(s) 1,3; a rank may
  // be stuck or dead", or for a server that did not answer, "server h2:8918 did not say which
  // ranks it waits for within 2000 ms; that server may be stuck or dead".
  std::string Describe(std::chrono::milliseconds waited) const;

 private:
  struct Asked {
    Server server;
    std::optional<std::string> answer;
  };
  bool asked_ = false;
  uint64_t coll_seq_ = 0;
  std::vector<Asked> servers_;
  Clock::time_point deadline_{};
};

}  // namespace optcast::client
