// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The server's part in a job's failover (docs/reliability.md): it collects the ranks' reports of
// dead servers, tells ranks that have not seen a death yet, and, when it is the first survivor in
// the job's server list, announces what every rank does next once all ranks reported the same
// dead set. It drops the collectives the ranks stripe again, and sends heartbeats to ranks that
// wait on it, so that a frozen server can be told from a slow job.

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
  // `heartbeats`: send them (not over libfabric, where unsolicited messages to an idle rank
  // stalled collectives; ranks there do not check them).
  FailoverCoordinator(ServerMetrics& metrics, ConnectionLoop& loop, JobTable& jobs, Collectives& collectives,
                      bool heartbeats);

  Status OnReport(ConnState* cs, const wire::FailoverReport& report);
  Status OnEpoch(ConnState* cs, const wire::EpochChange& change);
  // A rank left the job (closed, or died) while no collective of it was open here.
  void OnRankLeft(const std::shared_ptr<Job>& job);
  // A chunk striped before a failover that striped its collective again: dropped, not an error.
  static bool IsStale(const Job& job, const wire::CollDesc& d);
  void SendHeartbeats(Clock::time_point now);

 private:
  void Announce(const std::shared_ptr<Job>& job, const std::vector<uint8_t>& meta);
  // A failover needs a report from every rank; one that left the job can send none, and what the
  // others lack cannot be re-run without its input. Fails the job at once, naming the ranks.
  bool FailIfARankLeft(const std::shared_ptr<Job>& job);

  ServerMetrics& metrics_;
  ConnectionLoop& loop_;
  JobTable& jobs_;
  Collectives& collectives_;
  const bool heartbeats_;
  const std::vector<uint8_t> heartbeat_ = wire::EncodeHeartbeat();
};

}  // namespace optcast::server
