// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/failover.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <set>

#include "common/log.h"
#include "observe/trace.h"
#include "server/tree_upstream.h"

namespace optcast::server {
namespace {

std::string ListServers(uint64_t mask) {
  std::string out;
  for (int i = 0; i < 64; ++i) {
    if ((mask >> i) & 1) out += (out.empty() ? "" : ", ") + std::to_string(i);
  }
  return out;
}

}  // namespace

FailoverCoordinator::FailoverCoordinator(ServerMetrics& metrics, ConnectionLoop& loop, JobTable& jobs,
                                         Collectives& collectives)
    : metrics_(metrics), loop_(loop), jobs_(jobs), collectives_(collectives) {}

void FailoverCoordinator::Announce(const std::shared_ptr<Job>& job, const std::vector<uint8_t>& meta, bool ranks_only) {
  for (auto& [rank, p] : job->participants) {
    if (p.conn != nullptr && !p.conn->closing && !p.conn->dead && !(ranks_only && p.conn->server_member)) {
      loop_.Send(p.conn, transport::MakeOutMessage(meta, nullptr, 0));
    }
  }
}

bool FailoverCoordinator::FailIfARankLeft(const std::shared_ptr<Job>& job) {
  const JobFailover& fo = job->failover;
  // Only while reports are being collected: before the first, or once agreed, nothing waits.
  if (fo.reports.empty() || fo.agreed_through > fo.round_epoch) return false;
  std::vector<uint32_t> left;
  for (const auto& [rank, p] : job->participants) {
    if (p.departed && fo.reports.count(rank) == 0) left.push_back(rank);
  }
  if (left.empty()) return false;
  std::sort(left.begin(), left.end());
  uint64_t dead = 0;
  for (const auto& [rank, rep] : fo.reports) dead |= rep.dead_mask;
  jobs_.Fail(job, {Code::kPeerFailed,
                   fmt::format("rank(s) {} of job {} had left the job when server(s) {} of its list died; failover "
                               "needs every rank, so what the other ranks still lack from the dead server(s) cannot "
                               "be re-run exactly",
                               fmt::join(left, ", "), job->hex, ListServers(dead))});
  return true;
}

void FailoverCoordinator::OnRankLeft(const std::shared_ptr<Job>& job) {
  if (!job->failed) FailIfARankLeft(job);
}

Status FailoverCoordinator::OnReport(ConnState* cs, const wire::FailoverReport& r) {
  if (!cs->job) return ProtocolError("failover report before hello; say hello first");
  std::shared_ptr<Job> job = cs->job;
  if (r.dead_mask == 0) {
    return ProtocolError(fmt::format("rank {} sent a failover report that names no dead server", cs->rank));
  }
  if ((r.dead_mask >> r.server_index) & 1) {
    if (job->tree) return GiveUpTree(job, cs->rank, r);
    return ProtocolError(
        fmt::format("rank {} reports this server (its server {}) dead to itself", cs->rank, r.server_index));
  }
  if (job->tree && !job->tree->root()) return RelayUp(job, cs->rank, r, /*own=*/true);
  return Collect(job, cs, cs->rank, r);
}

Status FailoverCoordinator::Collect(const std::shared_ptr<Job>& job, ConnState* cs, uint32_t rank,
                                    const wire::FailoverReport& r) {
  JobFailover& fo = job->failover;
  if (r.epoch < fo.round_epoch || r.epoch < fo.agreed_through) {
    // The rank has not applied a failover the job agreed on. If every server before this one
    // in its list is dead, so is the one that announced it, perhaps before the announcement
    // reached this rank: this server, first left now, announces it again (a rank ignores a
    // failover it has already applied). Otherwise it learns of it on the way. Whether this
    // server is first left is read from the place the agreeing ranks gave it: a rank that places
    // it elsewhere would be sent an agreement that no other rank was.
    if (!fo.last_agreed.empty() && r.server_index != fo.last_agreed_index) {
      return jobs_.Abort(
          job, {Code::kMismatch, fmt::format("rank {} of job {} lists this server at place {}, the other ranks at {}; "
                                             "give every rank the same server list in the same order",
                                             rank, job->hex, r.server_index, fo.last_agreed_index)});
    }
    const uint64_t before = (uint64_t{1} << r.server_index) - 1;
    if (r.epoch + 1 == fo.agreed_through && (r.dead_mask & before) == before && !fo.last_agreed.empty()) {
      if (cs != nullptr) {
        loop_.Send(cs, transport::MakeOutMessage(fo.last_agreed, nullptr, 0));
      } else {
        // Relayed from below: the rank is behind a downstream server, which passes it on to
        // all its ranks (the others have applied it already and ignore it).
        Announce(job, fo.last_agreed);
      }
    }
    return Status::Ok();
  }
  fo.Record(rank, r);
  if (FailIfARankLeft(job)) return Status(Code::kCancelled, "job failed");
  uint64_t all_dead = 0;
  for (const auto& [reporter, rep] : fo.reports) all_dead |= rep.dead_mask;
  // Ranks that have not seen every death yet learn of it here, and report again. A downstream
  // server passes the notice on to its ranks.
  for (auto& [index, p] : job->participants) {
    if (p.conn == nullptr || p.conn->closing) continue;
    if (!p.conn->server_member) {
      auto it = fo.reports.find(index);
      if (it != fo.reports.end() && it->second.dead_mask == all_dead) continue;
    }
    if (fo.noticed[index] == all_dead) continue;
    fo.noticed[index] = all_dead;
    loop_.Send(p.conn, transport::MakeOutMessage(wire::EncodeNotice(all_dead), nullptr, 0));
  }
  if (fo.reports.size() < job->nranks) return Status::Ok();
  uint64_t boundary = UINT64_MAX;
  std::set<uint64_t> needing;
  for (const auto& [reporter, rep] : fo.reports) {
    if (rep.dead_mask != all_dead) return Status::Ok();
    if (rep.server_index != r.server_index) {
      return jobs_.Abort(
          job, {Code::kMismatch, fmt::format("ranks {} and {} of job {} list this server at different places ({} and "
                                             "{}); give every rank the same server list in the same order",
                                             rank, reporter, job->hex, r.server_index, rep.server_index)});
    }
    boundary = std::min(boundary, rep.first_unplanned);
    needing.insert(rep.needing.begin(), rep.needing.end());
  }
  fo.agreed_through = fo.round_epoch + 1;
  wire::FailoverAgreed agreed;
  agreed.epoch = fo.agreed_through;
  agreed.dead_mask = all_dead;
  agreed.boundary = boundary;
  for (uint64_t seq : needing) {
    if (seq < boundary) agreed.recover.push_back(seq);
  }
  fo.last_agreed = wire::EncodeAgreed(agreed);
  fo.last_agreed_index = r.server_index;
  // The first server left in the list speaks for all: every rank acts on the same announcement.
  // In a tree that is the root of the first tree left, and its announcement travels down.
  const uint64_t below = (uint64_t{1} << r.server_index) - 1;
  if ((all_dead & below) != below) return Status::Ok();
  Log().info(
      "job {}: every rank reports server(s) {} dead; failover to epoch {}: collectives from #{} are striped "
      "over the servers left, {} earlier one(s) re-run the dead servers' shares",
      job->hex, ListServers(all_dead), agreed.epoch, boundary, agreed.recover.size());
  Announce(job, fo.last_agreed);
  return Status::Ok();
}

Status FailoverCoordinator::OnEpoch(ConnState* cs, const wire::EpochChange& e) {
  if (!cs->job) return ProtocolError("epoch before hello; say hello first");
  std::shared_ptr<Job> job = cs->job;
  JobFailover& fo = job->failover;
  if (e.epoch <= fo.epoch) {
    if (fo.boundaries[e.epoch] != e.boundary) {
      return jobs_.Abort(
          job, {Code::kMismatch, fmt::format("ranks of job {} disagree on failover {}: collectives re-striped from #{} "
                                             "or from #{}",
                                             job->hex, e.epoch, fo.boundaries[e.epoch], e.boundary)});
    }
    return Status::Ok();
  }
  if (e.epoch != fo.epoch + 1 || (e.dead_mask & fo.dead_mask) != fo.dead_mask) {
    return ProtocolError(fmt::format("rank {} moved to failover epoch {} (dead servers {}) from epoch {}", cs->rank,
                                     e.epoch, ListServers(e.dead_mask), fo.epoch));
  }
  fo.epoch = e.epoch;
  fo.dead_mask = e.dead_mask;
  fo.boundaries.push_back(e.boundary);
  metrics_.Failover();
  Log().warn(
      "job {}: failover to epoch {}: server(s) {} of its list are dead; collectives from #{} move to the "
      "servers left",
      job->hex, e.epoch, ListServers(e.dead_mask), e.boundary);
  if (observe::TraceOn()) {
    observe::TraceArgs a;
    a.Add("job", job->hex).Add("epoch", e.epoch).Add("dead", ListServers(e.dead_mask)).Add("boundary", e.boundary);
    observe::TraceInstant("failover", "server", a);
  }
  collectives_.DropCollectives(job, [&](const wire::CollDesc& d) { return job->failover.IsStale(d); });
  // In a tree the servers above drop those collectives too; nothing of the old stripes follows
  // the Epoch on the link up either.
  if (job->tree && !job->tree->root()) {
    SendUp(*job->tree, loop_, metrics_, transport::MakeOutMessage(wire::EncodeEpoch(e), nullptr, 0));
  }
  // Every rank learns that nothing of the replaced stripes follows on this connection: an
  // all-gather's chunks need no other rank's, so some may have gone out before (protocol.md).
  Announce(job, wire::EncodeEpoch(e), /*ranks_only=*/true);
  return Status::Ok();
}

void FailoverCoordinator::SendHeartbeats(Clock::time_point now) {
  for (const auto& [id, job] : jobs_.all()) {
    // To every rank, not only those with a collective open here: a rank may wait on this server
    // before its first chunk has arrived (a slow transport, a busy host). In a tree too: a leaf
    // waiting on another rack is alive, and a rank that took it for dead would drop its tree.
    for (auto& [rank, p] : job->participants) {
      ConnState* cs = p.conn;
      // Ranks only: a downstream server's parent is not its rank, and a tree's servers see each
      // other die by their lost connections.
      if (cs == nullptr || cs->server_member || cs->closing || cs->dead) continue;
      if (now - cs->heartbeat_at < kHeartbeatInterval) continue;
      // Something already waits to go out: the rank will hear from us, and an idle rank that
      // does not read piles up nothing beyond its socket buffer.
      if (cs->conn->HasPendingWrites()) continue;
      cs->heartbeat_at = now;
      loop_.Send(cs, transport::MakeOutMessage(heartbeat_, nullptr, 0));
    }
  }
}

}  // namespace optcast::server
