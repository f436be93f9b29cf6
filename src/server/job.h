// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "transport/message.h"
#include "wire/protocol.h"

namespace optcast::server {

struct ConnState;

// One chunk position of a collective: collects every expected rank's contribution, then is
// reduced in rank order (or, for all-gather, forwarded).
struct Slot {
  wire::ChunkRef ref;
  std::vector<std::shared_ptr<uint8_t>> contribs;  // by rank (reductions) or [0] (all-gather)
  std::vector<uint8_t> have;                       // by rank: contribution fully received
  uint32_t arrived = 0;
  uint32_t expected = 0;
};

using SlotKey = std::pair<uint32_t, uint64_t>;  // (segment, offset)

// One collective of a job as seen by this server.
struct CollState {
  wire::CollDesc desc;
  uint32_t first_rank = 0;  // whose chunk defined `desc`, for mismatch messages
  uint64_t elems_done = 0;
  std::map<SlotKey, Slot> slots;
  // All-gather data may be ready for a rank before that rank has issued the collective; it is
  // held here until the rank's first chunk of this collective arrives (bounded by the senders'
  // windows, since they are acked only once their data went out).
  std::vector<uint8_t> joined;                                 // by rank
  std::vector<std::vector<transport::OutMessage>> deferred;  // by rank
};

// A job: a 128-bit id and its ranks' connections.
struct Job {
  wire::JobIdBytes id{};
  std::string hex;
  uint32_t nranks = 0;
  std::vector<ConnState*> ranks;  // nullptr: not connected (yet or any more)
  std::vector<uint8_t> departed;
  std::map<uint64_t, CollState> colls;
  Clock::time_point last_progress = Clock::now();
  bool failed = false;
};

// Describes a collective for error messages: "allreduce of 1024 float32 (sum)".
std::string DescribeColl(const wire::CollDesc& d);

// Checks a chunk against the collective's shape; the error names the problem.
Status ValidateChunk(const wire::Chunk& chunk, uint32_t nranks, uint32_t sender_rank);

// Explains how two ranks' descriptions of one collective differ.
std::string DescribeMismatch(const wire::CollDesc& a, uint32_t rank_a, const wire::CollDesc& b,
                             uint32_t rank_b);

}  // namespace optcast::server
