// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <memory>

#include "optcast/status.h"
#include "server/conn_state.h"
#include "server/connection_loop.h"
#include "server/job_table.h"
#include "server/options.h"
#include "server/server_metrics.h"
#include "server/tree_relay.h"

namespace optcast::server {

// Lets a connection into its job: the hello, the proof of the deployment secret when there is
// one, and the checks that keep an untrusted hello from taking a rank, a job or memory it should
// not. A refused connection gets an error and touches no job, unless the hello contradicts its
// job (then the job fails for all its ranks).
class Admission {
 public:
  Admission(const ServerOptions& opts, ServerMetrics& metrics, ConnectionLoop& loop, JobTable& jobs, TreeRelay& tree);

  Status OnHello(ConnState* cs, const wire::Hello& h);
  Status OnProof(ConnState* cs, const wire::Mac& proof);

 private:
  // Adds an admitted connection to its job as the rank it asked for.
  Status Join(ConnState* cs, const wire::Hello& h);
  // The hello's rank count and rank, against this server's limits.
  Status CheckShape(const wire::Hello& h, bool tree) const;
  // The job the hello names, created on its first hello; a status refuses the connection.
  Status NewJob(ConnState* cs, const wire::Hello& h, std::shared_ptr<Job>* out);
  Status JoinExisting(ConnState* cs, const wire::Hello& h, const std::shared_ptr<Job>& job);

  const ServerOptions& opts_;
  ServerMetrics& metrics_;
  ConnectionLoop& loop_;
  JobTable& jobs_;
  TreeRelay& tree_;
};

}  // namespace optcast::server
