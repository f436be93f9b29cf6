// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/tree_job.h"

#include <fmt/format.h>

#include "server/connection_loop.h"
#include "server/job.h"
#include "server/server_metrics.h"
#include "server/tree_math.h"

namespace optcast::server {

bool TreeJob::SlotFull(const Slot& slot) const { return members.sealed() && slot.arrived == members.members(); }

std::string TreeJob::WaitingFor(const std::vector<uint32_t>& missing) const {
  if (members.sealed() && !missing.empty()) return fmt::format("{}", fmt::join(missing, ","));
  if (!members.sealed() && !link) {
    return fmt::format("(only {} of the job's {} ranks have joined the tree)", members.weight(), members.nranks());
  }
  if (link) {
    return fmt::format("(none here: waiting for the upstream server {}{})", link->parent(),
                       members.sealed() ? "" : " to report that every rank has joined the tree");
  }
  return "(unknown)";
}

void TreeJob::SeatOpenSlots(Job* job) const {
  const std::vector<uint32_t>& seated = members.seated();
  for (auto& [seq, coll] : job->colls) {
    const bool gather = coll.desc.coll == CollType::kAllGather;
    for (auto& [key, slot] : coll.slots) {
      std::vector<std::shared_ptr<uint8_t>> contribs(gather ? 1 : seated.size());
      std::vector<uint8_t> have(seated.size(), 0);
      if (gather) contribs[0] = std::move(slot.contribs[0]);
      for (size_t seat = 0; seat < seated.size(); ++seat) {
        if (!gather) contribs[seat] = std::move(slot.contribs[seated[seat]]);
        have[seat] = slot.have[seated[seat]];
      }
      slot.contribs = std::move(contribs);
      slot.have = std::move(have);
    }
  }
}

void TreeJob::SendUp(ConnectionLoop& loop, ServerMetrics& metrics, transport::OutMessage msg) {
  if (up == nullptr || up->closing || up->dead) return;
  if (!link->welcomed()) {
    link->Hold(std::move(msg));
    return;
  }
  metrics.BytesOut(msg.payload_len);
  loop.Send(up, std::move(msg));
}

void TreeJob::SendPartialUp(ConnectionLoop& loop, ServerMetrics& metrics, const wire::CollDesc& d, const Slot& slot,
                            transport::TrafficClass traffic_class) {
  // A failover's re-run: a result copy goes up as it came (element type); a partial missing a
  // rank's input says so, and the root fails the chunk unless another member holds a copy.
  const bool copy = slot.copy_seat >= 0;
  const DataType type = copy ? d.dtype : PartialType(d.dtype, d.op);
  const uint64_t pbytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(type);
  transport::OutMessage m;
  wire::Chunk chunk{d, slot.ref};
  chunk.flags = copy ? wire::kChunkResultCopy : slot.input_lost ? wire::kChunkInputLost : 0;
  wire::EncodeChunkTo(chunk, transport::StartOutMessage(&m, wire::kChunkMetaBytes, slot.result.get(), pbytes));
  m.keepalive = slot.result;
  m.traffic_class = traffic_class;
  SendUp(loop, metrics, std::move(m));
}

void TreeJob::CloseUpstream(ConnectionLoop& loop, const std::vector<uint8_t>& farewell) {
  if (up == nullptr) return;
  ConnState* conn = up;
  if (!link->welcomed() && !conn->closing && !conn->dead) {
    if (link->close_after_welcome()) return;
    link->Hold(transport::MakeOutMessage(farewell, nullptr, 0));
    link->CloseAfterWelcome();
    return;
  }
  up = nullptr;
  conn->upstream_of.reset();
  if (conn->closing || conn->dead) return;
  if (link->welcomed() && !farewell.empty()) conn->conn->Send(transport::MakeOutMessage(farewell, nullptr, 0));
  loop.CloseAfterFlush(conn);
}

}  // namespace optcast::server
