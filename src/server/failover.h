// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The server's part in a job's failover (docs/reliability.md): it collects the ranks' reports of
// dead servers, tells ranks that have not seen a death yet, and, when it is the first survivor in
// the job's server list, announces what every rank does next once all ranks reported the same
// dead set. It drops the collectives the ranks stripe again, and sends heartbeats to ranks that
// wait on it, so that a frozen server can be told from a slow job.
//
// In an aggregation tree (docs/tree.md, "Failure") a rank's place j in its list is tree j for
// every rank, so a dead server of tree j means the job drops tree j. The agreement is the flat
// one, worked out at the roots: leaves pass their ranks' reports up, the first live root announces
// and its announcement travels down (tree_failover.cc).

#include <memory>

#include "optcast/status.h"
#include "server/collectives.h"
#include "server/conn_state.h"
#include "server/connection_loop.h"
#include "server/job_table.h"
#include "server/server_metrics.h"
#include "wire/protocol.h"

namespace optcast::server {

// How often every rank of a flat job hears from this server, at least.
inline constexpr std::chrono::milliseconds kHeartbeatInterval{250};

class FailoverCoordinator {
 public:
  FailoverCoordinator(ServerMetrics& metrics, ConnectionLoop& loop, JobTable& jobs, Collectives& collectives);

  Status OnReport(ConnState* cs, const wire::FailoverReport& report);
  Status OnEpoch(ConnState* cs, const wire::EpochChange& change);
  // Aggregation trees (tree_failover.cc): a downstream server passes up rank `rank`'s report;
  // the parent passes down a Notice, an Agreed failover or an Epoch.
  Status OnRelayedReport(ConnState* cs, uint32_t rank, const wire::FailoverReport& report);
  Status OnFromParent(ConnState* cs, const wire::Message& msg);
  // A rank left the job (closed, or died) while no collective of it was open here.
  void OnRankLeft(const std::shared_ptr<Job>& job);
  void SendHeartbeats(Clock::time_point now);

 private:
  // Works out the agreement from rank `rank`'s report: at a flat server, or at a tree's root.
  // `cs`: the reporting rank's own connection, or null for a report relayed from below.
  Status Collect(const std::shared_ptr<Job>& job, ConnState* cs, uint32_t rank, const wire::FailoverReport& r);
  // To every member here, downstream servers included (they pass it on to their own);
  // `ranks_only`: not to the downstream servers.
  void Announce(const std::shared_ptr<Job>& job, const std::vector<uint8_t>& meta, bool ranks_only = false);
  // Below a tree's root: keeps a rank's report (so that a rank that left fails the job here at
  // once) and passes it up.
  Status RelayUp(const std::shared_ptr<Job>& job, uint32_t rank, const wire::FailoverReport& r, bool own);
  // A rank of a tree job reports this server's tree dead: the job goes on over its other trees,
  // and this tree gives the job up.
  Status GiveUpTree(const std::shared_ptr<Job>& job, uint32_t rank, const wire::FailoverReport& r);
  // A failover needs a report from every rank; one that left the job can send none, and what the
  // others lack cannot be re-run without its input. Fails the job at once, naming the ranks.
  bool FailIfARankLeft(const std::shared_ptr<Job>& job);

  ServerMetrics& metrics_;
  ConnectionLoop& loop_;
  JobTable& jobs_;
  Collectives& collectives_;
  const std::vector<uint8_t> heartbeat_ = wire::EncodeHeartbeat();
};

}  // namespace optcast::server
