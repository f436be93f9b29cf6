// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/env.h"
#include "observe/trace.h"
#include "server/memory_budget.h"
#include "server/tree_job.h"
#include "transport/message.h"
#include "wire/protocol.h"

namespace optcast::server {

struct ConnState;

// One chunk position of a collective: collects every expected rank's contribution, then is
// reduced in rank order (or, for all-gather, forwarded).
struct Slot {
  wire::ChunkRef ref;
  std::vector<std::shared_ptr<uint8_t>> contribs;  // by seat (Job::SeatOf), or [0] (all-gather)
  std::vector<uint8_t> have;                       // by seat: contribution fully received
  uint32_t arrived = 0;
  uint32_t expected = 0;
  Clock::time_point first_arrival{};  // for the chunk latency metric
  uint64_t state_bytes = 0;           // bookkeeping charged to the job for this slot
  // Failover: a seat that sent the result instead of its input (forwarded as is), and whether a
  // rank's input was lost to a result cut short.
  int32_t copy_seat = -1;
  bool input_lost = false;
  // What goes back down once reduced: the result (in a flat job, contribs[0] reduced in place);
  // in an aggregation tree first the combined partial, then the result from upstream.
  std::shared_ptr<uint8_t> result;
};

using SlotKey = std::pair<uint32_t, uint64_t>;  // (segment, offset)

// An all-gather chunk on its way to the other ranks. Its source is acked once every other rank
// got it, so a fast source cannot pile data up behind a slow reader. Ranks that have not issued
// the collective yet get it when they do: one entry per chunk, however many ranks are absent.
struct AgDelivery {
  std::shared_ptr<uint8_t> data;
  uint64_t bytes = 0;
  wire::ChunkDone done;
  uint32_t src = 0;
  std::vector<uint8_t> result_meta;
  uint32_t unsent = 0;      // sends not yet written out (to joined and absent ranks)
  uint32_t not_joined = 0;  // ranks that get it when they join
  uint32_t epoch = 0;       // its collective's failover epoch
  transport::TrafficClass traffic_class = transport::TrafficClass::kBulk;  // its collective's (TrafficClassOf)
};

// One collective of a job as seen by this server.
struct CollState {
  wire::CollDesc desc;
  uint32_t first_rank = 0;  // whose chunk defined `desc`, for mismatch messages
  uint64_t elems_done = 0;
  std::map<SlotKey, Slot> slots;
  // All-gather data may be ready for a rank before that rank has issued the collective; it is
  // held here until the rank's first chunk of this collective arrives (bounded by the senders'
  // windows, since they are acked only once their data went out).
  std::unordered_set<uint32_t> joined;  // ranks whose chunks of this collective arrived here
  std::vector<std::shared_ptr<AgDelivery>> ag_waiting;
  uint64_t state_bytes = 0;  // bookkeeping charged to the job for this collective
  // Unique per server for each time a collective's state is made. A failover may drop a collective
  // and its re-run make a new one under the same number while a payload for the old one is still
  // landing (a large payload over tcp, any over ofi); that payload must not count for the new one.
  uint64_t incarnation = 0;
};

using CollIt = std::map<uint64_t, CollState>::iterator;
using SlotIt = std::map<SlotKey, Slot>::iterator;

// A member of a job at this server: a rank, or in a tree a downstream server (known by the first
// rank it admitted).
struct Participant {
  ConnState* conn = nullptr;  // nullptr once disconnected
  bool departed = false;      // left the job; its rank cannot be taken again
  // Chunks it sent that have no answer yet. A well-behaved client keeps this within its window;
  // the server caps it so one rank cannot pile up state before the others join.
  uint32_t open_chunks = 0;
};

// What this server knows of a job's failovers (docs/reliability.md): the epochs its ranks applied,
// and the reports of the failover being agreed.
struct JobFailover {
  uint32_t epoch = 0;                   // failovers applied (the ranks' Epoch messages)
  uint64_t dead_mask = 0;               // the servers the job lost, by place in its server list
  std::vector<uint64_t> boundaries{0};  // [e]: collectives from here on were striped again at epoch e
  uint32_t round_epoch = 0;             // the reports being collected come from ranks at this epoch
  uint32_t agreed_through = 0;          // the last epoch this server saw agreed
  // That agreement, as the first server left announced it (every survivor works it out from the
  // same reports): re-sent to a rank that reports from before it once the announcer is dead too.
  std::vector<uint8_t> last_agreed;
  // Where the ranks whose reports made that agreement place this server in their lists. A rank's
  // list does not change order, so a later report placing it elsewhere is a misconfigured rank.
  uint32_t last_agreed_index = 0;
  std::unordered_map<uint32_t, wire::FailoverReport> reports;  // by rank, this round
  std::unordered_map<uint32_t, uint64_t> noticed;              // the dead set last told each rank

  // Keeps `rank`'s report for this round; a report from a later epoch starts a new round.
  void Record(uint32_t rank, const wire::FailoverReport& r) {
    if (r.epoch > round_epoch) {
      round_epoch = r.epoch;
      reports.clear();
      noticed.clear();
    }
    reports[rank] = r;
  }
  // A chunk striped before a failover that striped its collective again: dropped, not an error.
  bool IsStale(const wire::CollDesc& d) const {
    return d.epoch < epoch && !wire::IsRecoverySeq(d.coll_seq) && d.coll_seq >= boundaries[d.epoch + 1];
  }
};

// A job: a 128-bit id and its ranks' connections.
struct Job {
  wire::JobIdBytes id{};
  std::string hex;
  uint32_t nranks = 0;
  // The members that joined here, by rank: as many entries as this server's fan-in, however
  // many ranks the job has (in a tree most of them belong to other servers).
  std::unordered_map<uint32_t, Participant> participants;
  uint32_t connected = 0;  // participants with a connection
  uint32_t departed_count = 0;
  // Chunk buffers and per-chunk state of this job; its parent is the server's budget.
  std::shared_ptr<MemoryBudget> memory;
  uint64_t state_bytes = 0;  // per-collective and per-chunk state charged to `memory`
  std::map<uint64_t, CollState> colls;
  Clock::time_point last_progress = Clock::now();
  bool failed = false;
  JobFailover failover;
  // Set when the job spans an aggregation tree: this server has a parent or downstream servers.
  std::unique_ptr<TreeJob> tree;

  // Where member `index` (a rank, or a downstream server's first rank) contributes in a chunk
  // slot: its rank in a flat job, its seat (join order) in a tree, where slots are as wide as
  // this server's fan-in rather than the job.
  uint32_t SeatOf(uint32_t index) const { return tree ? tree->members.seat(index) : index; }
  // How many seats a slot needs now (a tree's grows as members join, until it is sealed).
  uint32_t Seats() const { return tree ? static_cast<uint32_t>(tree->members.members()) : nranks; }

  // The members that joined here, in seat order: every rank of a flat job; in a tree, this
  // server's ranks and downstream servers (the job's other ranks belong to other servers).
  std::vector<uint32_t> Members() const;
  // Calls f(index) for each member that joined here, in seat order, as Members() lists them.
  template <typename F>
  void ForEachMember(F&& f) const {
    if (tree) {
      for (uint32_t index : tree->members.seated()) f(index);
    } else {
      for (uint32_t r = 0; r < nranks; ++r) f(r);
    }
  }
  // Every member contributed to `slot` (in a tree, only once the member set is sealed).
  bool SlotFull(const Slot& slot) const { return tree ? tree->SlotFull(slot.arrived) : slot.arrived == slot.expected; }

  // The connection of member `index`, or nullptr if it is not (or no longer) connected here.
  ConnState* ConnOf(uint32_t index) const;
  // Records that member `index` joined here on `conn`.
  void Attach(uint32_t index, ConnState* conn);
  // Forgets the connection of member `index` if it is `conn`; `departed`: the member left the job.
  void Detach(uint32_t index, const ConnState* conn, bool departed);
  // One chunk member `index` sent has been answered (a result or an ack went back).
  void Answered(uint32_t index);
  // The lowest rank that left the job, for error messages (only valid while departed_count > 0).
  uint32_t FirstDeparted() const;
  // The job became a tree job: slots opened while it was flat hold contributions by rank; a
  // tree holds them by seat.
  void SeatOpenSlots();
};

// FNV-1a over a job id, for the maps keyed by it.
struct JobIdHash {
  size_t operator()(const wire::JobIdBytes& id) const {
    size_t h = 1469598103934665603ull;
    for (uint8_t b : id) h = (h ^ b) * 1099511628211ull;
    return h;
  }
};

// Bookkeeping bytes charged per collective and per chunk position, so memory limits also bound
// the state a job's metadata holds (it grows with the server's fan-in).
uint64_t CollStateBytes(uint32_t members);
uint64_t SlotStateBytes(uint32_t seats);

// Describes a collective for error messages: "allreduce of 1024 float32 (sum)".
std::string DescribeColl(const wire::CollDesc& d);

// Checks a chunk against the collective's shape; the error names the problem.
Status ValidateChunk(const wire::Chunk& chunk, uint32_t nranks, uint32_t sender_rank);

// A chunk's trace event arguments.
observe::TraceArgs ChunkTraceArgs(const wire::CollDesc& d, const wire::ChunkRef& ref, uint64_t bytes);

// Explains how two ranks' descriptions of one collective differ.
std::string DescribeMismatch(const wire::CollDesc& a, uint32_t rank_a, const wire::CollDesc& b, uint32_t rank_b);

}  // namespace optcast::server
