// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "optcast/status.h"
#include "server/buffer_pool.h"
#include "server/conn_state.h"
#include "server/connection_loop.h"
#include "server/job.h"
#include "server/job_table.h"
#include "server/options.h"
#include "server/reduction_dispatcher.h"
#include "server/server_metrics.h"

namespace optcast::server {

// The collectives of every job: takes each member's chunks into the slots of their collective,
// checks them against what the other members said, hands full slots to the reduction dispatcher
// (or, for all-gather, forwards them), and sends the results back. A step that goes wrong for the
// whole job fails it; one that breaks the protocol returns an error for its connection alone.
class Collectives : public ReductionSink {
 public:
  Collectives(const ServerOptions& opts, ServerMetrics& metrics, ConnectionLoop& loop, JobTable& jobs, BufferPool& pool,
              ReductionDispatcher& dispatcher);

  // A chunk's header: *payload_dst gets where its payload lands.
  Status OnChunkMeta(ConnState* cs, const wire::Chunk& chunk, uint64_t payload_len, uint8_t** payload_dst);
  // The payload of the chunk announced last on `cs` has landed.
  Status OnChunkComplete(ConnState* cs);
  // Every member contributed to the slot: reduce it, or forward an all-gather chunk.
  void CompleteSlot(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit);
  // Sends the slot's result to the members that receive it, acks to the rest.
  void SendReduced(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit);
  void SendTo(Job& job, uint32_t index, transport::OutMessage msg);
  void OnReduced(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit) override;

  // Forgets the collectives a failover re-striped (`stale`): their chunks' senders are owed no
  // answer, and none of their slots can be full (docs/reliability.md).
  void DropCollectives(const std::shared_ptr<Job>& job, const std::function<bool(const wire::CollDesc&)>& stale);

  // The job moved on; the server as a whole too (see last_activity()).
  void Progressed(Job& job);
  // When a chunk last arrived at any job.
  Clock::time_point last_activity() const { return last_activity_; }

 private:
  // Whether a rank may start or add to a collective now.
  MaybeFailure Admit(Job& job, uint32_t rank, const wire::CollDesc& d) const;
  // The collective `d` names, opened on its first chunk; `rank` joins it.
  MaybeFailure OpenCollective(const std::shared_ptr<Job>& job, uint32_t rank, const wire::CollDesc& d, CollIt* out);
  // The slot `ref` names, opened on its first chunk.
  MaybeFailure OpenSlot(Job& job, CollState& coll, uint32_t rank, const wire::ChunkRef& ref, SlotIt* out);
  // Makes a buffer for the chunk's payload.
  Status ReceiveInto(const std::shared_ptr<Job>& job, ConnState* cs, CollIt cit, SlotIt sit, uint64_t bytes,
                     uint8_t** payload_dst);
  // A slot's data has gone out: forget it, and the collective once all its slots are done.
  void FinishSlot(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit);
  SlotIt NewSlot(std::map<SlotKey, Slot>* slots, const SlotKey& key);
  void RecycleSlot(std::map<SlotKey, Slot>::node_type node);

  // All-gather: a complete chunk goes to every other rank; its source is acked once all have it.
  void Forward(const std::shared_ptr<Job>& job, CollState& coll, const Slot& slot);
  void SendAgChunk(const std::shared_ptr<Job>& job, uint32_t rank, const std::shared_ptr<AgDelivery>& delivery);
  void SendAck(const std::weak_ptr<Job>& weak, uint32_t rank, const wire::ChunkDone& done, uint32_t epoch,
               transport::TrafficClass traffic_class);
  void TraceSend(ConnState* cs, transport::OutMessage* msg);

  const ServerOptions& opts_;
  ServerMetrics& metrics_;
  ConnectionLoop& loop_;
  JobTable& jobs_;
  BufferPool& pool_;
  ReductionDispatcher& dispatcher_;
  Clock::time_point last_activity_{};
  // Finished chunk slots kept for reuse, so a steady stream of chunks allocates no slot memory.
  std::vector<std::map<SlotKey, Slot>::node_type> free_slots_;
  uint64_t last_incarnation_ = 0;  // CollState::incarnation
};

}  // namespace optcast::server
