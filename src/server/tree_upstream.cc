// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/tree_upstream.h"

#include <utility>

#include "server/conn_state.h"
#include "server/tree_math.h"

namespace optcast::server {

void SendUp(TreeJob& tree, ConnectionLoop& loop, ServerMetrics& metrics, transport::OutMessage msg) {
  if (tree.up == nullptr || tree.up->closing || tree.up->dead) return;
  if (!tree.link->welcomed()) {
    tree.link->Hold(std::move(msg));
    return;
  }
  metrics.BytesOut(msg.payload_len);
  loop.Send(tree.up, std::move(msg));
}

void SendPartialUp(TreeJob& tree, ConnectionLoop& loop, ServerMetrics& metrics, const wire::CollDesc& d,
                   const Slot& slot, transport::TrafficClass traffic_class) {
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
  SendUp(tree, loop, metrics, std::move(m));
}

void CloseUpstream(TreeJob& tree, ConnectionLoop& loop, const std::vector<uint8_t>& farewell) {
  if (tree.up == nullptr) return;
  ConnState* conn = tree.up;
  if (!tree.link->welcomed() && !conn->closing && !conn->dead) {
    if (tree.link->close_after_welcome()) return;
    tree.link->Hold(transport::MakeOutMessage(farewell, nullptr, 0));
    tree.link->CloseAfterWelcome();
    return;
  }
  tree.up = nullptr;
  conn->upstream_of.reset();
  if (conn->closing || conn->dead) return;
  if (tree.link->welcomed() && !farewell.empty()) conn->conn->Send(transport::MakeOutMessage(farewell, nullptr, 0));
  loop.CloseAfterFlush(conn);
}

}  // namespace optcast::server
