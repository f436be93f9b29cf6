// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/admission.h"

#include <fmt/format.h>

#include <algorithm>

#include "auth/proof.h"
#include "common/log.h"
#include "observe/trace.h"

namespace optcast::server {
namespace {

// A tree job's rank count costs nothing per rank at any one server; the cap only keeps rank
// arithmetic far from overflow.
constexpr uint32_t kMaxTreeRanks = 1u << 24;

}  // namespace

Admission::Admission(const ServerOptions& opts, ServerMetrics& metrics, ConnectionLoop& loop, JobTable& jobs,
                     TreeRelay& tree)
    : opts_(opts), metrics_(metrics), loop_(loop), jobs_(jobs), tree_(tree) {}

Status Admission::OnHello(ConnState* cs, const wire::Hello& h) {
  if (cs->job || cs->challenged) return ProtocolError("second hello on one connection");
  if (jobs_.draining()) return loop_.Refuse(cs, UnavailableError("the server is shutting down; use another server"));
  if (!opts_.secret.empty()) {
    // The proof covers this nonce, so it is good for this connection and this hello only.
    cs->challenged = true;
    cs->pending_hello = h;
    cs->nonce = auth::NewNonce();
    loop_.Send(cs, transport::MakeOutMessage(wire::EncodeChallenge(cs->nonce), nullptr, 0));
    return Status::Ok();
  }
  return Join(cs, h);
}

Status Admission::OnProof(ConnState* cs, const wire::Mac& proof) {
  if (cs->job || !cs->challenged) return ProtocolError("proof without a challenge; send hello first");
  const wire::Hello h = cs->pending_hello;
  cs->challenged = false;
  if (!auth::VerifyProof(opts_.secret, cs->nonce, h, proof)) {
    metrics_.AuthFailure();
    return loop_.Refuse(cs, Status(Code::kUnauthenticated,
                                   fmt::format("authentication failed for rank {} of job {}: the hello's proof does "
                                               "not match this server's secret; give workers and servers the same "
                                               "OPTCAST_SECRET_FILE",
                                               h.rank, wire::JobIdHex(h.job_id))));
  }
  return Join(cs, h);
}

Status Admission::Join(ConnState* cs, const wire::Hello& h) {
  if (std::optional<Status> failed = jobs_.FailureOf(h.job_id)) {
    // A rank arriving after its job failed learns why at once instead of waiting for a timeout.
    return loop_.Refuse(cs, Status(failed->code(), fmt::format("job {} failed before rank {} joined: {}",
                                                               wire::JobIdHex(h.job_id), h.rank, failed->message())));
  }
  std::shared_ptr<Job> job = jobs_.Find(h.job_id);
  if (Status st = CheckShape(h, tree_.IsTreeJob(job.get(), h)); !st.ok()) return loop_.Refuse(cs, st);
  if (job) {
    OPTCAST_RETURN_IF_ERROR(JoinExisting(cs, h, job));
  } else {
    OPTCAST_RETURN_IF_ERROR(NewJob(cs, h, &job));
  }
  job->Attach(h.rank, cs);
  cs->job = job;
  cs->rank = h.rank;
  cs->server_member = (h.flags & wire::kHelloFromServer) != 0;
  if (job->tree || cs->server_member) {
    if (auto failure = tree_.Join(job, h.rank, cs->server_member)) return jobs_.Abort(job, *failure);
  }
  if (observe::TraceOn()) {
    const std::string who = fmt::format("job {} rank {} ({})", job->hex.substr(0, 8), h.rank, cs->conn->peer());
    cs->trace_track = observe::NewTraceTrack(who + " recv");
    cs->trace_track_tx = observe::NewTraceTrack(who + " send");
  }
  // A root started as one (--topology) says so to its own ranks before any child has joined.
  const bool in_tree = job->tree != nullptr || opts_.upstream.has_value() || opts_.tree_root;
  wire::Welcome w{opts_.max_payload, static_cast<uint32_t>(opts_.job_timeout.count()),
                  in_tree ? wire::kWelcomeInTree : 0u, opts_.link_rate_bits,
                  // The server's lanes (its options as the server resolved them, server.cc).
                  static_cast<uint32_t>(std::max(opts_.io_threads, 1))};
  loop_.Send(cs, transport::MakeOutMessage(wire::EncodeWelcome(w), nullptr, 0));
  Log().debug("rank {} of job {} joined from {}", h.rank, job->hex, cs->conn->peer());
  return Status::Ok();
}

Status Admission::CheckShape(const wire::Hello& h, bool tree) const {
  const std::string hex = wire::JobIdHex(h.job_id);
  // A tree job keeps state for its members here only, so its rank count may exceed a server's
  // fan-in. Per-job and per-chunk state grow with the fan-in, and a hello is untrusted input: the
  // cap keeps one job from making every chunk slot allocate megabytes.
  const uint32_t max_ranks = tree ? kMaxTreeRanks : opts_.max_fan_in;
  if (h.nranks == 0 || h.nranks > max_ranks) {
    return InvalidArgument(
        fmt::format("hello for job {} with nranks={}; a job has 1..{} ranks {}", hex, h.nranks, max_ranks,
                    tree ? "in an aggregation tree"
                         : "on a flat server (--max-fan-in); larger jobs need an aggregation tree: start servers with "
                           "--upstream or --topology (a tree's root with --topology too)"));
  }
  if (h.rank >= h.nranks) {
    return InvalidArgument(fmt::format("rank {} is out of range for job {} of {} ranks; ranks are 0..{}", h.rank, hex,
                                       h.nranks, h.nranks - 1));
  }
  return Status::Ok();
}

Status Admission::NewJob(ConnState* cs, const wire::Hello& h, std::shared_ptr<Job>* out) {
  std::shared_ptr<Job> job = jobs_.Create(h);
  // Too wide to be flat here: a tree job from its first hello, with state per member.
  if (!opts_.upstream && h.nranks > opts_.max_fan_in) job->tree = std::make_unique<TreeJob>(h.nranks);
  if (opts_.upstream) {
    if (Status st = tree_.OpenUpstream(job, h.rank); !st.ok()) {
      jobs_.Fail(job, {st.code(), st.message()});
      return loop_.Refuse(cs, st);
    }
  }
  *out = std::move(job);
  return Status::Ok();
}

Status Admission::JoinExisting(ConnState* cs, const wire::Hello& h, const std::shared_ptr<Job>& job) {
  if (job->nranks != h.nranks) {
    Status st =
        MismatchError(fmt::format("rank {} joined job {} with nranks={} but the job has nranks={}; every "
                                  "rank must pass the same nranks",
                                  h.rank, job->hex, h.nranks, job->nranks));
    jobs_.Fail(job, {st.code(), st.message()});
    return loop_.Refuse(cs, st);
  }
  auto taken = job->participants.find(h.rank);
  if (taken != job->participants.end() && (taken->second.conn != nullptr || taken->second.departed)) {
    const std::string holder = taken->second.conn ? taken->second.conn->conn->peer() : "an earlier connection";
    return loop_.Refuse(cs, InvalidArgument(fmt::format("rank {} of job {} is already taken by {}; every process "
                                                        "needs its own rank",
                                                        h.rank, job->hex, holder)));
  }
  if (taken == job->participants.end() && job->participants.size() >= opts_.max_fan_in) {
    return loop_.Refuse(
        cs, ResourceExhausted(fmt::format("rank {} cannot join job {}: this server already combines {} members of "
                                          "it, its limit (--max-fan-in={}); spread the job's ranks over more leaf "
                                          "servers of the tree",
                                          h.rank, job->hex, job->participants.size(), opts_.max_fan_in)));
  }
  return Status::Ok();
}

}  // namespace optcast::server
