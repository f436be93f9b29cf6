// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/job_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/log.h"
#include "server/tree_upstream.h"

namespace optcast::server {
namespace {

std::string Bytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30) && b % (uint64_t{1} << 30) == 0) return fmt::format("{}G", b >> 30);
  if (b >= (uint64_t{1} << 20) && b % (uint64_t{1} << 20) == 0) return fmt::format("{}M", b >> 20);
  if (b >= (uint64_t{1} << 10) && b % (uint64_t{1} << 10) == 0) return fmt::format("{}K", b >> 10);
  return fmt::format("{}", b);
}

// Failed jobs are remembered for one job timeout, at most this many of them.
constexpr size_t kMaxFailedJobs = 4096;

}  // namespace

JobTable::JobTable(const ServerOptions& opts, ServerMetrics& metrics, ConnectionLoop& loop, SharedJobs& shared)
    : opts_(opts), metrics_(metrics), loop_(loop), shared_(shared), memory_(shared.memory()) {}

JobTable::~JobTable() = default;

std::shared_ptr<Job> JobTable::Find(const wire::JobIdBytes& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::shared_ptr<Job> JobTable::Create(const wire::Hello& h) {
  auto job = std::make_shared<Job>();
  job->id = h.job_id;
  job->hex = wire::JobIdHex(h.job_id);
  job->nranks = h.nranks;
  job->memory = shared_.Open(h.job_id);  // one budget for the job on every lane
  jobs_.emplace(h.job_id, job);
  Log().info("job {} created ({} ranks)", job->hex, h.nranks);
  return job;
}

std::optional<Status> JobTable::FailureOf(const wire::JobIdBytes& id) const {
  auto it = failed_jobs_.find(id);
  if (it == failed_jobs_.end()) return std::nullopt;
  return Status(it->second.code, it->second.text);
}

void JobTable::Fail(std::shared_ptr<Job> job, const JobFailure& why) {
  if (job->failed) return;
  job->failed = true;
  if (why.over_limit) metrics_.LimitFailure();
  metrics_.JobFailed(why.code);
  Log().warn("job {} failed: {}", job->hex, why.text);
  const uint64_t seq = job->colls.empty() ? 0 : job->colls.begin()->first;
  if (job->tree) CloseUpstream(*job->tree, loop_, wire::EncodeError(wire::ErrorMsg{why.code, seq, why.text}));
  for (auto& [index, p] : job->participants) {
    ConnState* cs = p.conn;
    if (cs == nullptr) continue;
    job->Detach(index, cs, /*departed=*/false);
    loop_.SendErrorAndClose(cs, Status(why.code, why.text), seq);
    cs->job.reset();
  }
  job->colls.clear();
  ReleaseState(*job, job->state_bytes);
  RememberFailure(job->id, why.code, why.text);
  Forget(job);
}

void JobTable::Forget(const std::shared_ptr<Job>& job) {
  // Only the table's own entry, once: the lanes count it as one job open (shared_jobs.h).
  auto it = jobs_.find(job->id);
  if (it == jobs_.end() || it->second != job) return;
  jobs_.erase(it);
  shared_.Close(job->id);
}

Status JobTable::Abort(std::shared_ptr<Job> job, const JobFailure& why) {
  Fail(std::move(job), why);
  return Status(Code::kCancelled, "job failed");
}

void JobTable::RetireIfIdle(const std::shared_ptr<Job>& job) {
  if (job->connected != 0 || !job->colls.empty()) return;
  Log().info("job {} finished", job->hex);
  if (job->tree) CloseUpstream(*job->tree, loop_, wire::EncodeBye());
  Forget(job);
}

void JobTable::FailStalled(Clock::time_point now) {
  std::vector<std::shared_ptr<Job>> expired;
  for (auto& [id, job] : jobs_) {
    if (!job->colls.empty() && now - job->last_progress > opts_.job_timeout) expired.push_back(job);
  }
  for (auto& job : expired) {
    const CollState& oldest = job->colls.begin()->second;
    Fail(job, {Code::kTimeout,
               fmt::format("collective #{} ({}) of job {} made no progress for {} ms; still waiting for rank(s) "
                           "{}; a rank may be stuck or dead",
                           oldest.desc.coll_seq, DescribeColl(oldest.desc), job->hex, opts_.job_timeout.count(),
                           WaitingFor(*job, oldest))});
  }
}

std::string JobTable::WaitingFor(const Job& job, uint64_t coll_seq) const {
  auto it = job.colls.find(coll_seq);
  if (it != job.colls.end()) return WaitingFor(job, it->second);
  if (job.colls.empty()) return fmt::format("(none: no collective of job {} is open here)", job.hex);
  return fmt::format("(none for #{}, which is not open here; its oldest open collective #{} waits for rank(s) {})",
                     coll_seq, job.colls.begin()->first, WaitingFor(job, job.colls.begin()->second));
}

std::string JobTable::WaitingFor(const Job& job, const CollState& oldest) const {
  // The members that joined here; in a tree the job's other ranks belong to other servers.
  std::vector<uint32_t> members = job.Members();
  std::sort(members.begin(), members.end());
  std::vector<uint32_t> missing;
  for (uint32_t r : members) {
    bool lacks = job.ConnOf(r) == nullptr;
    const uint32_t seat = job.SeatOf(r);
    for (const auto& [key, slot] : oldest.slots) {
      const bool expects = oldest.desc.coll != CollType::kAllGather || key.first == r;
      if (expects && (seat >= slot.have.size() || !slot.have[seat])) lacks = true;
    }
    if (lacks) missing.push_back(r);
  }
  if (job.tree) return job.tree->WaitingFor(missing);
  return missing.empty() ? std::string("(unknown)") : fmt::format("{}", fmt::join(missing, ","));
}

void JobTable::RememberFailure(const wire::JobIdBytes& id, Code code, const std::string& text) {
  while (failed_jobs_.size() >= kMaxFailedJobs && !failed_order_.empty()) {
    failed_jobs_.erase(failed_order_.front());
    failed_order_.pop_front();
  }
  if (failed_jobs_.emplace(id, FailedJob{code, text, Clock::now() + opts_.job_timeout}).second) {
    failed_order_.push_back(id);
  }
}

void JobTable::ForgetOldFailures(Clock::time_point now) {
  while (!failed_order_.empty()) {
    auto it = failed_jobs_.find(failed_order_.front());
    if (it != failed_jobs_.end() && it->second.forget_at > now) break;
    if (it != failed_jobs_.end()) failed_jobs_.erase(it);
    failed_order_.pop_front();
  }
}

MaybeFailure JobTable::ChargeState(Job& job, uint64_t bytes, const char* what) {
  const MemoryBudget* refused = nullptr;
  if (!job.memory->TryCharge(bytes, &refused)) return MemoryFailure(job, *refused, bytes, what);
  job.state_bytes += bytes;
  return std::nullopt;
}

void JobTable::ReleaseState(Job& job, uint64_t bytes) {
  job.state_bytes -= bytes;
  job.memory->Release(bytes);
}

MaybeFailure JobTable::ChargeBuffer(Job& job, uint64_t capacity, const char* what) {
  const MemoryBudget* refused = nullptr;
  if (!job.memory->TryCharge(capacity, &refused)) return MemoryFailure(job, *refused, capacity, what);
  return std::nullopt;
}

JobFailure JobTable::MemoryFailure(const Job& job, const MemoryBudget& refused, uint64_t bytes,
                                   const char* what) const {
  const bool server_wide = &refused == memory_.get();
  return {Code::kResourceExhausted,
          fmt::format("job {} needs {} more bytes for {} but {} ({}={}) already holds {}; {}", job.hex, bytes, what,
                      server_wide ? "the server" : "the job", refused.name(), Bytes(refused.limit()), refused.used(),
                      server_wide ? "raise --memory-limit, or spread the jobs over more servers"
                                  : "raise --job-memory-limit, or lower OPTCAST_WINDOW / OPTCAST_CHUNK_BYTES"),
          /*over_limit=*/true};
}

bool JobTable::AnyInFlight() const {
  for (const auto& [id, job] : jobs_) {
    if (!job->colls.empty()) return true;
  }
  return false;
}

size_t JobTable::InFlight() const {
  size_t open = 0;
  for (const auto& [id, job] : jobs_) open += job->colls.empty() ? 0 : 1;
  return open;
}

}  // namespace optcast::server
