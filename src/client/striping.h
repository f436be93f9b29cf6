// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// How a client lays one collective over its servers: which servers carry it, its chunks on each
// (plan.h has the arithmetic), the pieces failover tracks, and where each chunk's bytes are.

#include <cstdint>
#include <vector>

#include "client/plan.h"
#include "client/request.h"
#include "client/server_link.h"
#include "wire/protocol.h"

namespace optcast::client {

class Striping {
 public:
  // What is fixed when a rank has joined its servers. `rate_bits`: the slowest port rate the
  // servers announced (0: unknown, or a tree, whose leaves carry only their own members' shards);
  // `max_payload`: the smallest largest chunk a server accepts; `chunks`: the transport's rules.
  Striping(int nranks, int rank, bool failover, uint64_t chunk_bytes, uint64_t max_payload, uint64_t rate_bits,
           const ChunkPolicy& chunks);
  Striping() = default;

  // Stripes `req` over the servers `alive` (the job's epoch `epoch`) and queues each server's
  // chunks on its link in `links`, unless that link has failed (its share waits for a failover).
  void Stripe(Request* req, const std::vector<uint32_t>& alive, uint32_t epoch, std::vector<ServerLink>& links) const;
  // Whether this rank sends the chunk `ref` (an all-gather's other segments it only receives).
  bool Sends(const Request& req, const wire::ChunkRef& ref) const;
  // Where the bytes of chunk `ref` that this rank sends are: its input, or with `flags` holding
  // kChunkResultCopy, the result it received.
  const uint8_t* ChunkSource(const Request& req, const wire::ChunkRef& ref, uint8_t flags) const;

 private:
  // The pieces of one server's share: the chunks this rank sends, and for an all-gather the same
  // chunks of every other rank's segment, which it receives.
  void AddPieces(Request* req, const std::vector<wire::ChunkRef>& sends, uint32_t link) const;

  int nranks_ = 0;
  int rank_ = 0;
  bool failover_ = false;
  uint64_t chunk_bytes_ = 0;
  uint64_t max_payload_ = 0;
  uint64_t rate_bits_ = 0;
  ChunkPolicy policy_{};
};

}  // namespace optcast::client
