// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// Failover through an aggregation tree (docs/tree.md, "Failure"). Every rank's place j in its
// server list is tree j, the same for every rank, so a dead server of tree j (a leaf, an inner
// server or the root) means the whole job drops tree j, as a flat job drops server j:
//
// - the rest of tree j fails the job with "unavailable" (its lost member or parent), which its
//   ranks take as the death of their server j, and each rank reports to its other servers;
// - a server below a root passes every report up; each live root works out the agreement from the
//   reports of all the job's ranks, and the root of the first tree left announces it; Notices and
//   the announcement travel down to every rank; the ranks' Epochs travel up;
// - a rank that drops a server of tree j whose connection still works (it learned of the death
//   from the others) says so to that server, which then gives the job up: its tree no longer
//   carries it, and no error reaches a rank that has moved on.

#include <fmt/format.h>

#include <algorithm>

#include "common/log.h"
#include "server/failover.h"
#include "server/tree_upstream.h"

namespace optcast::server {

Status FailoverCoordinator::OnRelayedReport(ConnState* cs, uint32_t rank, const wire::FailoverReport& r) {
  std::shared_ptr<Job> job = cs->job;
  if (!job->tree || rank >= job->nranks || r.dead_mask == 0 || ((r.dead_mask >> r.server_index) & 1)) {
    return ProtocolError(
        fmt::format("downstream server {} passed up a failover report of rank {} that this "
                    "server cannot take (job of {} ranks, dead servers {:#x}, server {})",
                    cs->conn->peer(), rank, job->nranks, r.dead_mask, r.server_index));
  }
  if (!job->tree->root()) return RelayUp(job, rank, r, /*own=*/false);
  return Collect(job, nullptr, rank, r);
}

Status FailoverCoordinator::RelayUp(const std::shared_ptr<Job>& job, uint32_t rank, const wire::FailoverReport& r,
                                    bool own) {
  JobFailover& fo = job->failover;
  if (own && r.epoch >= fo.round_epoch && r.epoch >= fo.agreed_through) {
    // The root waits for every rank's report; one of this server's ranks that has left can send
    // none, so this server, which sees it leave, fails the job at once.
    fo.Record(rank, r);
    if (FailIfARankLeft(job)) return Status(Code::kCancelled, "job failed");
  }
  SendUp(*job->tree, loop_, metrics_, transport::MakeOutMessage(wire::EncodeFailoverRelay(rank, r), nullptr, 0));
  return Status::Ok();
}

Status FailoverCoordinator::OnFromParent(ConnState* cs, const wire::Message& msg) {
  std::shared_ptr<Job> job = cs->upstream_of;
  if (!job->tree->link->welcomed()) {
    return ProtocolError("the upstream server sent a failover message before its welcome");
  }
  JobFailover& fo = job->failover;
  switch (msg.type) {
    case wire::MsgType::kNotice: Announce(job, wire::EncodeNotice(msg.notice_mask)); break;
    case wire::MsgType::kAgreed:
      // Kept, so that a rank of this server that leaves before reporting fails no agreed failover.
      fo.agreed_through = std::max(fo.agreed_through, msg.agreed.epoch);
      fo.last_agreed = wire::EncodeAgreed(msg.agreed);
      Announce(job, fo.last_agreed);
      break;
    default: break;  // an Epoch: this server answered its own ranks' Epochs already
  }
  return Status::Ok();
}

Status FailoverCoordinator::GiveUpTree(const std::shared_ptr<Job>& job, uint32_t rank, const wire::FailoverReport& r) {
  // "Unavailable" to the rest of the tree and to its other ranks: a rank that has not dropped
  // this tree yet takes it as the death of its server, as the others did.
  Log().info("job {}: rank {} dropped this server's aggregation tree (its server {}) in a failover", job->hex, rank,
             r.server_index);
  return jobs_.Abort(job,
                     {Code::kUnavailable,
                      fmt::format("the job dropped this server's aggregation tree (server {} of rank {}'s list) in "
                                  "a failover and goes on over its other trees; this tree gave job {} up",
                                  r.server_index, rank, job->hex)});
}

}  // namespace optcast::server
