// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The collectives a client has in flight, by sequence number. A request is filed under its own
// sequence number and, after a failover, also under those of the re-runs of its dead servers'
// shares (wire::RecoverySeq), so that an answer to either finds it.

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "client/request.h"

namespace optcast::client {

class RequestTable {
 public:
  // The sequence number of the next collective issued, and taking it.
  uint64_t next_seq() const { return next_seq_; }
  uint64_t TakeSeq() { return next_seq_++; }

  bool empty() const { return active_.empty(); }
  // Files `req` under `seq`: its own, or one of its re-runs'.
  void Add(uint64_t seq, Request* req) { active_.emplace(seq, req); }
  // The request answering to `seq`, or null.
  Request* Find(uint64_t seq) const;
  // A finished request leaves, under its own number and its re-runs'.
  void Remove(const Request& req);
  // Every request in flight once (not again for its re-runs), by sequence number.
  std::vector<Request*> Roots() const;
  // The request in flight issued first (the table must not be empty).
  Request* Oldest() const;
  // Whether some request in flight still expects an answer from server link `link`.
  bool AnyWaitingOn(size_t link) const;
  // Takes every entry whose request still expects an answer from `link` out of the table, and
  // returns those requests once each.
  std::vector<Request*> TakeWaitingOn(size_t link);
  // Empties the table, and returns the requests that were in it once each.
  std::vector<Request*> TakeAll();

 private:
  std::unordered_map<uint64_t, Request*> active_;
  uint64_t next_seq_ = 1;
};

}  // namespace optcast::client
