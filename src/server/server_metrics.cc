// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/server_metrics.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace optcast::server {

namespace {

using Seconds = std::chrono::duration<double>;

// Error kinds as metric labels: the status codes a server reports, in snake case.
const char* ErrorKind(Code c) {
  switch (c) {
    case Code::kOk: return "none";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kMismatch: return "mismatch";
    case Code::kProtocol: return "protocol";
    case Code::kTimeout: return "timeout";
    case Code::kUnavailable: return "disconnected";
    case Code::kPeerFailed: return "peer_failed";
    case Code::kResourceExhausted: return "resource_exhausted";
    case Code::kUnauthenticated: return "unauthenticated";
    case Code::kInternal: return "internal";
    case Code::kCancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace

ServerMetrics::ServerMetrics()
    : totals_(this),
      bytes_in_(registry_.AddCounter("optcast_server_received_bytes_total", "Payload bytes received from ranks")),
      bytes_out_(registry_.AddCounter("optcast_server_sent_bytes_total", "Payload bytes sent to ranks")),
      jobs_created_(registry_.AddCounter("optcast_server_jobs_created_total", "Jobs created by a first hello")),
      chunks_(registry_.AddCounter("optcast_server_chunks_total", "Chunks reduced (or forwarded, for all-gather)")),
      failovers_(registry_.AddCounter("optcast_failovers_total",
                                      "Failovers applied: a job's ranks moved off reduction servers that died")),
      reduced_on_workers_(registry_.AddCounter(
          "optcast_server_worker_reductions_total",
          "Chunks reduced on a reduction thread rather than on the event loop (--reduce-offload-share)")),
      chunk_latency_(registry_.AddHistogram(
          "optcast_server_chunk_latency_seconds",
          "From a chunk's first contribution arriving to its result queued for every rank (waiting for "
          "the last rank, then reducing)",
          observe::ExponentialBounds(1e-5, 2, 21))),
      reduce_time_(registry_.AddHistogram("optcast_server_reduce_seconds", "Time to reduce one chunk",
                                          observe::ExponentialBounds(1e-6, 2, 21))),
      jobs_(registry_.AddGauge("optcast_server_jobs_active", "Jobs with at least one rank or collective")),
      ranks_(registry_.AddGauge("optcast_server_ranks_connected", "Ranks connected, over all jobs")),
      connections_(registry_.AddGauge("optcast_server_connections", "Open TCP connections, joined or not")),
      send_queue_(registry_.AddGauge("optcast_server_send_queue_messages",
                                     "Messages queued on connections and not yet written")),
      chunks_pending_(
          registry_.AddGauge("optcast_server_chunks_pending", "Chunks waiting for contributions from ranks")),
      buffer_bytes_(registry_.AddGauge("optcast_server_buffer_bytes", "Chunk buffer memory in use")) {
  const CollType colls[] = {CollType::kAllReduce, CollType::kReduceScatter, CollType::kAllGather};
  for (CollType c : colls) {
    collectives_[static_cast<int>(c)] = &registry_.AddCounter(
        "optcast_server_collectives_total", "Collectives completed, by type", {{"type", CollTypeName(c)}});
  }
  for (int c = 1; c <= static_cast<int>(Code::kCancelled); ++c) {
    errors_[c] =
        &registry_.AddCounter("optcast_server_errors_total", "Jobs failed and connections refused, by the error's kind",
                              {{"kind", ErrorKind(static_cast<Code>(c))}});
  }
  errors_[0] = errors_[static_cast<int>(Code::kInternal)];
}

ServerMetrics::ServerMetrics(ServerMetrics& totals, int lane)
    : totals_(&totals),
      bytes_in_(totals.bytes_in_),
      bytes_out_(totals.bytes_out_),
      jobs_created_(totals.jobs_created_),
      chunks_(totals.chunks_),
      failovers_(totals.failovers_),
      reduced_on_workers_(totals.reduced_on_workers_),
      chunk_latency_(totals.chunk_latency_),
      reduce_time_(totals.reduce_time_),
      jobs_(totals.jobs_),
      ranks_(totals.ranks_),
      connections_(totals.connections_),
      send_queue_(totals.send_queue_),
      chunks_pending_(totals.chunks_pending_),
      buffer_bytes_(totals.buffer_bytes_) {
  std::copy(std::begin(totals.collectives_), std::end(totals.collectives_), std::begin(collectives_));
  std::copy(std::begin(totals.errors_), std::end(totals.errors_), std::begin(errors_));
  const observe::Labels labels{{"lane", std::to_string(lane)}};
  observe::Registry& r = totals.registry_;
  lane_bytes_in_ = &r.AddCounter("optcast_server_lane_received_bytes_total",
                                 "Payload bytes received from ranks, by the server's lane (event loop)", labels);
  lane_bytes_out_ = &r.AddCounter("optcast_server_lane_sent_bytes_total",
                                  "Payload bytes sent to ranks, by the server's lane (event loop)", labels);
  lane_connections_ =
      &r.AddGauge("optcast_server_lane_connections", "Open connections, by the server's lane (event loop)", labels);
}

void ServerMetrics::Error(Code code) {
  const int c = static_cast<int>(code);
  errors_[c >= 0 && c <= static_cast<int>(Code::kCancelled) ? c : static_cast<int>(Code::kInternal)]->Inc();
}

void ServerMetrics::CollectiveDone(CollType coll) {
  const int c = static_cast<int>(coll);
  if (c >= 0 && c < 3) collectives_[c]->Inc();
}

void ServerMetrics::ChunkDone(std::chrono::steady_clock::duration latency) {
  chunks_.Inc();
  chunk_latency_.Observe(Seconds(latency).count());
}

void ServerMetrics::Reduced(std::chrono::steady_clock::duration took) { reduce_time_.Observe(Seconds(took).count()); }

void ServerMetrics::SetLevels(const Levels& l) {
  Level(ranks_, mine_.ranks, l.ranks);
  SetConnections(static_cast<size_t>(l.connections));
  Level(send_queue_, mine_.send_queue, l.send_queue);
  Level(chunks_pending_, mine_.chunks_pending, l.chunks_pending);
  Level(buffer_bytes_, mine_.buffer_bytes, l.buffer_bytes);
}

}  // namespace optcast::server
