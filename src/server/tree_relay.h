// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "optcast/status.h"
#include "server/buffer_pool.h"
#include "server/collectives.h"
#include "server/conn_state.h"
#include "server/connection_loop.h"
#include "server/job.h"
#include "server/job_table.h"
#include "server/options.h"
#include "server/server_metrics.h"
#include "server/upstream_link.h"
#include "transport/dialer.h"
#include "transport/endpoint.h"

namespace optcast::server {

// The aggregation tree (docs/tree.md) as this server takes part in it: members and downstream
// servers joining a tree job, sealing its member set, and the link to the parent server that
// carries this server's partials up and the results down. The per-job state is TreeJob.
class TreeRelay {
 public:
  TreeRelay(const ServerOptions& opts, ServerMetrics& metrics, ConnectionLoop& loop, JobTable& jobs, BufferPool& pool,
            Collectives& collectives);

  // Looks the parent up (--upstream), once, before the loop runs, and makes the dialer of the
  // server's transport that connects to it.
  Status ResolveParent();
  // Whether a job that rank `h` joins is a tree job here.
  bool IsTreeJob(const Job* existing, const wire::Hello& h) const;
  // A new job when this server has a parent: joins the parent's job as one member.
  Status OpenUpstream(const std::shared_ptr<Job>& job, uint32_t first_rank);
  // Member `index` (a rank, or a downstream server) joined a tree job here; a flat job becomes a
  // tree root when a downstream server joins it.
  MaybeFailure Join(const std::shared_ptr<Job>& job, uint32_t index, bool server);

  // Grow and Error from a downstream server of a job.
  Status OnDownstreamMessage(ConnState* cs, const wire::Message& msg);
  // Messages on the connection to the parent.
  Status OnUpstreamMeta(ConnState* cs, const wire::Message& msg, uint64_t payload_len, uint8_t** payload_dst);
  Status OnUpstreamComplete(ConnState* cs);
  // The connection to the parent failed: before the welcome the parent was never reached.
  void OnUpstreamLost(ConnState* cs, const Status& why);
  // Fails the jobs whose parent has not welcomed this server within the hello timeout.
  void ExpireUnwelcomed(Clock::time_point now);

 private:
  Status OnHandshake(ConnState* cs, const std::shared_ptr<Job>& job, const wire::Message& msg);
  Status OnUpstreamResult(ConnState* cs, const std::shared_ptr<Job>& job, const wire::Message& msg,
                          uint64_t payload_len, uint8_t** payload_dst);
  // Below the root the parent learns how many ranks this server carries; at the root the job is
  // sealed once all its ranks have joined the tree.
  MaybeFailure MembershipChanged(const std::shared_ptr<Job>& job);
  // Fixes the member set, tells the downstream servers, and completes the slots that were only
  // waiting for that.
  MaybeFailure Seal(const std::shared_ptr<Job>& job);

  const ServerOptions& opts_;
  ServerMetrics& metrics_;
  ConnectionLoop& loop_;
  JobTable& jobs_;
  BufferPool& pool_;
  Collectives& collectives_;
  transport::Endpoint parent_numeric_;         // --upstream, resolved at start
  std::unique_ptr<transport::Dialer> dialer_;  // the server's transport, toward the parent
};

}  // namespace optcast::server
