// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A collective in flight on a client, and the chunks it is made of. A request is the state the
// other parts of the client work on: the striping plan fills it, the links send from it and land
// results in it, failover moves its pieces between servers.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <memory>

#include "client/copy_buffer.h"
#include "client/wire_narrowing.h"
#include "optcast/status.h"
#include "wire/protocol.h"

namespace optcast {

// One chunk of a collective, for failover: which collective and server carry it now, and whether
// its answer is in. Every rank holds the same pieces for a collective (an all-gather's include
// the other ranks' chunks, which this rank only receives), so that all move them alike.
struct Piece {
  wire::ChunkRef ref;
  uint64_t coll_seq = 0;    // the request's own, or a re-run's (wire::RecoverySeq)
  uint32_t link = 0;        // the server that answers it
  bool awaiting = false;    // a result or an ack is due from `link` for `coll_seq`
  bool due = false;         // counted in the request's outstanding and pending_link[link]
  bool have = false;        // its result is in the receive buffer, or its ack came (a re-run keeps it)
  bool input_lost = false;  // in place, a result cut short by a dead server overwrote its input
};

// What Communicator's I* calls hand out (declared in optcast/communicator.h).
class Request {
 public:
  uint64_t seq = 0;
  wire::CollDesc desc;
  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t esize = 0;
  uint64_t outstanding = 0;            // results + acks still to come
  std::vector<uint64_t> pending_link;  // of which from each server link
  bool done = false;
  Status status;
  uint64_t trace_id = 0;             // nonzero: its request span is open in the trace
  bool retained = false;             // a copy of a completed allreduce kept for a failover's re-run (no caller)
  client::CopyBuffer copy;           // when retained: what a re-run may need from this rank
  client::CopyBuffer own_input;      // an in-place reduce-scatter's own segment, as it was sent
  uint32_t stale_rx = 0;             // results of its old stripes still landing (an all-gather)
  bool planned = false;              // striped over the servers (not while a failover is being agreed)
  std::vector<Piece> pieces;         // allreduce: every chunk, by offset
  std::vector<uint64_t> rerun_seqs;  // collectives that re-run its dead servers' shares
  // float32 on a 16-bit wire: send and recv above are its staging buffer, desc.dtype the wire type.
  std::unique_ptr<client::WireNarrowing> narrowing;

  // The index of the piece that starts at element `offset`, or SIZE_MAX (pieces are sorted).
  size_t FindPiece(uint64_t offset) const;
};

}  // namespace optcast
