// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// How many chunks a rank keeps in flight to one server: the credits that results bring back.
//
// Every rank's chunks for a server meet in one queue at that server's port, and the server can
// answer chunk k only once the slowest rank's chunk k is in. A rank that runs ahead puts its later
// chunks in that queue in front of the slowest rank's chunk k, so the result, and the download
// that would overlap the upload, waits for them (docs/benchmarks.md, "Mid-size collectives").
//
// In step, one round trip of a chunk is one upload round (n ranks' chunks through the server's
// port) plus one download round (its n results back out), so about 2·n/S chunks per link keep
// every link busy; two more absorb jitter. More only queues. A link starts each burst of work
// (whenever it had nothing in flight) at two chunks, which keeps the ranks in step while the
// first results come back, and opens by one chunk per window's worth of results up to that
// steady value.

#include <cstdint>

namespace optcast::client {

// The window a link starts with whenever it has nothing in flight.
inline constexpr int kInitialWindowChunks = 2;
// The limits it may grow to: at least kMinWindowChunks, at most kMaxWindowChunks chunks or
// kWindowBytes bytes.
inline constexpr uint64_t kWindowBytes = 512 * 1024;
inline constexpr int kMinWindowChunks = 2;
inline constexpr int kMaxWindowChunks = 16;

// The window a link grows to for `nranks` ranks striped over `nservers` servers: 2·ceil(n/S) + 2
// chunks, within [kMinWindowChunks, kMaxWindowChunks].
int SteadyWindowChunks(int nranks, int nservers);

class SendWindow {
 public:
  // `fixed_chunks` > 0: exactly that many chunks in flight, no ramp (OPTCAST_WINDOW). Otherwise
  // the window ramps from kInitialWindowChunks to `max_chunks` (SteadyWindowChunks).
  explicit SendWindow(int fixed_chunks = 0, int max_chunks = kMaxWindowChunks)
      : fixed_chunks_(fixed_chunks), max_chunks_(max_chunks) {}

  // Whether one more chunk of `bytes` may be sent now.
  bool HasRoom(uint64_t bytes) const;
  void OnSent(uint64_t bytes);
  // A chunk's result or acknowledgement came back.
  void OnReturned(uint64_t bytes);

  int inflight() const { return inflight_; }
  uint64_t inflight_bytes() const { return inflight_bytes_; }
  int limit_chunks() const { return fixed_chunks_ > 0 ? fixed_chunks_ : limit_; }

 private:
  int fixed_chunks_;
  int max_chunks_;
  int inflight_ = 0;
  uint64_t inflight_bytes_ = 0;
  int limit_ = kInitialWindowChunks;
  int returned_at_limit_ = 0;  // results back since the limit last grew
};

}  // namespace optcast::client
