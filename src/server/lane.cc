// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/lane.h"

#include <fmt/format.h>
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "common/log.h"
#include "observe/trace.h"

namespace optcast::server {

Lane::Lane(const ServerOptions& opts, int index, int lanes, ServerMetrics& totals, SharedJobs& shared, HandOff hand_off)
    : opts_(opts),
      index_(index),
      lanes_(lanes),
      hand_off_(std::move(hand_off)),
      metrics_(totals, index),
      loop_(opts_, metrics_, *this),
      jobs_(opts_, metrics_, loop_, shared),
      dispatcher_(metrics_, jobs_, pool_, opts_.reduce_offload_share),
      collectives_(opts_, metrics_, loop_, jobs_, pool_, dispatcher_),
      tree_(opts_, metrics_, loop_, jobs_, pool_, collectives_),
      admission_(opts_, metrics_, loop_, jobs_, tree_),
      failover_(metrics_, loop_, jobs_, collectives_) {
  dispatcher_.set_sink(&collectives_);
}

Lane::~Lane() {
  dispatcher_.StopWorkers();
  {
    std::lock_guard lock(handed_mu_);
    handed_.clear();
  }
  loop_.DestroyAll();
}

Status Lane::Start(int reduce_threads) {
  if (index_ == 0) {
    OPTCAST_RETURN_IF_ERROR(tree_.ResolveParent());
    OPTCAST_RETURN_IF_ERROR(loop_.Listen());
  } else {
    OPTCAST_RETURN_IF_ERROR(loop_.Open());
  }
  // Descriptors now (a server's idle descriptor count is fixed once it listens), threads in Run().
  dispatcher_.CreateWorkers(reduce_threads);
  if (ReduceWorkers* workers = dispatcher_.workers()) {
    OPTCAST_RETURN_IF_ERROR(loop_.Watch(workers->wake_fd(), workers));
  }
  return Status::Ok();
}

void Lane::HandOver(std::unique_ptr<ConnState> cs) {
  {
    std::lock_guard lock(handed_mu_);
    handed_.push_back(std::move(cs));
  }
  loop_.Wake();
}

void Lane::TakeHandedOver() {
  std::vector<std::unique_ptr<ConnState>> taken;
  {
    std::lock_guard lock(handed_mu_);
    if (handed_.empty()) return;
    taken.swap(handed_);
  }
  for (auto& owned : taken) {
    ConnState* cs = owned.get();
    cs->hand_off_lane = -1;
    const wire::Hello hello = cs->pending_hello;
    if (!loop_.Adopt(std::move(owned)).ok()) {
      cs->dead = true;
      continue;
    }
    if (Status st = admission_.OnHello(cs, hello); !st.ok() && !cs->closing && !cs->dead) OnConnectionLost(cs, st);
  }
}

Status Lane::OnHello(ConnState* cs, const wire::Hello& h) {
  // First: a refusal below would close a connection that is already a job's member without
  // telling the job, which would then wait for it until its timeout.
  if (cs->job || cs->challenged || cs->hand_off_lane >= 0) return ProtocolError("second hello on one connection");
  if (h.lane >= static_cast<uint32_t>(lanes_)) {
    return loop_.Refuse(cs, InvalidArgument(fmt::format("a hello for lane {}, but this server has {} lane{} (0..{})",
                                                        h.lane, lanes_, lanes_ == 1 ? "" : "s", lanes_ - 1)));
  }
  if (lanes_ > 1) {
    // A job is combined in one place per lane. Its downstream servers join lane 0 only, while
    // its ranks join every lane, so on a server of several lanes a job has one kind of member
    // or the other. Every hello passes here first (on the listening lane 0), so lane 0's table
    // knows every member of the job.
    const bool from_server = (h.flags & wire::kHelloFromServer) != 0;
    if (std::shared_ptr<Job> job = jobs_.Find(h.job_id)) {
      for (const auto& [index, p] : job->participants) {
        if (p.conn == nullptr || p.conn->server_member == from_server) continue;
        return loop_.Refuse(
            cs, InvalidArgument(fmt::format(
                    "job {} has {} here and a {} joins, but this server runs {} lanes, and a job with both ranks "
                    "and downstream servers is combined on one: start this server with --topology (a root with "
                    "children) or --io-threads 1",
                    job->hex, from_server ? "ranks" : "downstream servers", from_server ? "downstream server" : "rank",
                    lanes_)));
      }
    }
  }
  if (h.lane != static_cast<uint32_t>(index_)) {
    // Answered there: the lane that serves a connection is the one that authenticates it.
    cs->pending_hello = h;
    cs->hand_off_lane = static_cast<int>(h.lane);
    return Status::Ok();
  }
  return admission_.OnHello(cs, h);
}

Status Lane::Run() {
  observe::TraceThreadName(lanes_ == 1 ? std::string("server event loop") : fmt::format("server lane {}", index_));
  // Named for top -H, perf and the lanes benchmark. Lane 0 runs on the caller's thread: a main
  // thread's name is the process's, which stays the caller's.
  if (gettid() != getpid()) pthread_setname_np(pthread_self(), fmt::format("optcast-lane{}", index_).c_str());
  // The worker threads start here, not in Start(): a process may fork between the two (tests
  // do), and a fork should find no thread but the caller's.
  dispatcher_.StartWorkers();
  auto next_sweep = Clock::now();
  while (!stop_.load()) {
    OPTCAST_RETURN_IF_ERROR(loop_.Poll(100));
    TakeHandedOver();
    loop_.FlushDirty();
    if (Clock::now() >= next_sweep) {
      Sweep();
      UpdateLevels();
      next_sweep = Clock::now() + std::chrono::milliseconds(100);
    }
    loop_.ReapDead();
    metrics_.SetBufferBytes(pool_.outstanding_bytes());
    if (drain_requested_.load() && !jobs_.draining()) BeginDrain();
    if (jobs_.draining() && DrainStep()) break;
  }
  return Status::Ok();
}

Status Lane::OnMessageMeta(transport::Connection& c, std::span<const uint8_t> meta, uint64_t payload_len,
                           uint8_t** payload_dst) {
  auto* cs = static_cast<ConnState*>(c.user_data);
  if (cs->hand_off_lane >= 0) return Status(Code::kCancelled, "handed to another lane");
  if (const uint16_t v = wire::VersionOf(meta); v != wire::kProtocolVersion && v != 0 && !cs->job && !cs->upstream_of) {
    // A peer of another release: refused in its own version's framing, so that it can read why.
    const std::string why = fmt::format(
        "this client speaks Optcast protocol version {} and the server at {} speaks version {}; run the same "
        "Optcast release on clients and servers (upgrade the older side)",
        v, fmt::format("{}:{}", opts_.listen.host, loop_.port()), wire::kProtocolVersion);
    Log().warn("refusing {}: {}", cs->conn->peer(), why);
    metrics_.Error(Code::kProtocol);
    cs->conn->Send(transport::MakeOutMessage(wire::EncodeErrorForVersion({Code::kProtocol, 0, why}, v), nullptr, 0));
    loop_.CloseAfterFlush(cs);
    return Status(Code::kCancelled, "connection refused");
  }
  wire::Message msg;
  OPTCAST_RETURN_IF_ERROR(wire::Decode(meta, &msg));
  if (cs->upstream_of) {
    // A tree's failover travels down from the root (tree_failover.cc).
    if (msg.type == wire::MsgType::kNotice || msg.type == wire::MsgType::kAgreed || msg.type == wire::MsgType::kEpoch) {
      if (payload_len != 0) return ProtocolError("a failover message with a payload");
      return failover_.OnFromParent(cs, msg);
    }
    return tree_.OnUpstreamMeta(cs, msg, payload_len, payload_dst);
  }
  switch (msg.type) {
    case wire::MsgType::kHello:
      if (payload_len != 0) return ProtocolError("hello carries a payload");
      return OnHello(cs, msg.hello);
    case wire::MsgType::kProof:
      if (payload_len != 0) return ProtocolError("proof carries a payload");
      return admission_.OnProof(cs, msg.proof);
    case wire::MsgType::kChunk: return collectives_.OnChunkMeta(cs, msg.chunk, payload_len, payload_dst);
    case wire::MsgType::kFailover:
      if (payload_len != 0) return ProtocolError("failover report carries a payload");
      return failover_.OnReport(cs, msg.report);
    case wire::MsgType::kEpoch:
      if (payload_len != 0) return ProtocolError("epoch carries a payload");
      return failover_.OnEpoch(cs, msg.epoch);
    case wire::MsgType::kBye:
      if (!cs->job) return ProtocolError("goodbye before hello");
      cs->said_bye = true;
      return Status::Ok();
    case wire::MsgType::kFailoverRelay:
      if (!cs->job || !cs->server_member || payload_len != 0) {
        return ProtocolError("only a downstream server of a job passes failover reports up, with no payload");
      }
      return failover_.OnRelayedReport(cs, msg.relay_rank, msg.report);
    case wire::MsgType::kStallQuery: {
      if (!cs->job) return ProtocolError("stall query before hello");
      if (payload_len != 0) return ProtocolError("stall query carries a payload");
      // Answered without touching the job: asking is not progress.
      const wire::StallReport report{msg.stall_query_seq, jobs_.WaitingFor(*cs->job, msg.stall_query_seq)};
      loop_.Send(cs, transport::MakeOutMessage(wire::EncodeStallReport(report), nullptr, 0));
      return Status::Ok();
    }
    case wire::MsgType::kError:
      if (cs->job && !cs->server_member) {
        // The rank gives up (it lost another of the job's servers): the job cannot go on, and
        // its other ranks learn why (Fail logs it).
        if (payload_len != 0) return ProtocolError("error report carries a payload");
        jobs_.Fail(cs->job, {Code::kPeerFailed, fmt::format("rank {} ({}) of job {} gave up: {}", cs->rank,
                                                            cs->conn->peer(), cs->job->hex, msg.error.text)});
        return Status::Ok();
      }
      [[fallthrough]];
    case wire::MsgType::kGrow:
      if (cs->job && cs->server_member) return tree_.OnDownstreamMessage(cs, msg);
      [[fallthrough]];
    default: return ProtocolError(fmt::format("a client may not send message type {}", static_cast<int>(msg.type)));
  }
}

Status Lane::OnMessageComplete(transport::Connection& c) {
  auto* cs = static_cast<ConnState*>(c.user_data);
  // A hello for another lane: stop reading here, the connection moves (ConnectionLoop::HandOff).
  if (cs->hand_off_lane >= 0) return Status(Code::kCancelled, "handed to another lane");
  cs->rx_dst.reset();  // the payload has landed: the transport writes there no more
  if (cs->upstream_of) return tree_.OnUpstreamComplete(cs);
  return collectives_.OnChunkComplete(cs);
}

void Lane::OnConnectionLost(ConnState* cs, const Status& why) {
  if (cs->upstream_of) {
    tree_.OnUpstreamLost(cs, why);
    return;
  }
  std::shared_ptr<Job> job = cs->job;
  if (!job) {
    if (cs->challenged) {
      // Went away or broke the protocol instead of proving the secret.
      metrics_.AuthFailure();
      cs->challenged = false;
    }
    if (why.code() == Code::kUnavailable) {
      cs->dead = true;
    } else {
      Log().warn("refusing connection from {}: {}", cs->conn->peer(), why.message());
      loop_.SendErrorAndClose(cs, why, 0);
    }
    return;
  }
  if (why.code() != Code::kUnavailable) {
    jobs_.Fail(job, {why.code(),
                     fmt::format("rank {} ({}) of job {}: {}", cs->rank, cs->conn->peer(), job->hex, why.message())});
    return;
  }
  if (cs->server_member && !cs->said_bye) {
    // A downstream server died (or its link did): this tree can no longer carry the job. The
    // error is "unavailable", so that ranks with failover on drop this tree and go on over the
    // job's other trees (docs/tree.md, "Failure").
    jobs_.Fail(job, {Code::kUnavailable,
                     fmt::format("the downstream server that is member {} ({}) of job {} disconnected: {}; this "
                                 "aggregation tree cannot carry the job any more",
                                 cs->rank, cs->conn->peer(), job->hex, why.message())});
    return;
  }
  job->Detach(cs->rank, cs, /*departed=*/true);
  cs->job.reset();
  cs->dead = true;
  if (job->colls.empty()) {
    Log().info("rank {} left job {}", cs->rank, job->hex);
    failover_.OnRankLeft(job);
    jobs_.RetireIfIdle(job);
    return;
  }
  jobs_.Fail(job, {Code::kPeerFailed,
                   fmt::format("{} {} ({}) disconnected during collective #{} of job {}: {}; the other ranks cannot "
                               "complete it",
                               cs->server_member ? "the downstream server that is member" : "rank", cs->rank,
                               cs->conn->peer(), job->colls.begin()->first, job->hex, why.message())});
}

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kGlibcOwnsTheHeap = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kGlibcOwnsTheHeap = false;
#else
constexpr bool kGlibcOwnsTheHeap = true;
#endif
#else
constexpr bool kGlibcOwnsTheHeap = true;
#endif

// Under a sanitizer, glibc's allocator is never used, so its arenas are set up lazily by the first
// malloc_trim; two servers in one process trimming at once then race on that set-up and crash.
// There is nothing of glibc's to give back there, and elsewhere one trim at a time is enough.
void GiveFreedHeapBackToTheSystem() {
  if constexpr (kGlibcOwnsTheHeap) {
    static std::mutex one_trim_at_a_time;
    std::lock_guard lock(one_trim_at_a_time);
    malloc_trim(0);
  }
}

}  // namespace

void Lane::Sweep() {
  const auto now = Clock::now();
  jobs_.ForgetOldFailures(now);
  MaybeGiveBackMemory(now);
  loop_.SweepIdle(now);
  // A parent that never welcomes this server's hello fails the job below it.
  tree_.ExpireUnwelcomed(now);
  jobs_.FailStalled(now);
  failover_.SendHeartbeats(now);
  // The last events of a burst reach the file even if no other event follows.
  observe::MaybeFlushTrace();
}

void Lane::MaybeGiveBackMemory(Clock::time_point now) {
  if (pool_.cached_bytes() == 0 || now - collectives_.last_activity() < std::chrono::seconds(1)) return;
  if (jobs_.AnyInFlight()) return;
  pool_.Trim();
  GiveFreedHeapBackToTheSystem();
}

void Lane::UpdateLevels() {
  ServerMetrics::Levels l;
  l.jobs = static_cast<int64_t>(jobs_.all().size());
  loop_.AddLevels(&l);
  for (const auto& [id, job] : jobs_.all()) {
    for (const auto& [seq, coll] : job->colls) l.chunks_pending += static_cast<int64_t>(coll.slots.size());
  }
  l.buffer_bytes = static_cast<int64_t>(pool_.outstanding_bytes());
  metrics_.SetLevels(l);
}

void Lane::BeginDrain() {
  drain_deadline_ = Clock::now() + std::chrono::milliseconds(drain_ms_.load());
  loop_.CloseListener();
  jobs_.set_draining();
  metrics_.SetDraining();
  Log().info(
      "shutting down: no new connections or collectives; waiting up to {} ms for {} job(s) with collectives in "
      "flight",
      drain_ms_.load(), jobs_.InFlight());
}

bool Lane::DrainStep() {
  const auto now = Clock::now();
  if (jobs_.AnyInFlight() && now < drain_deadline_) return false;
  if (!drain_farewell_sent_) {
    // Whatever is left: idle jobs learn the server is gone, unfinished ones why they failed.
    drain_farewell_sent_ = true;
    std::vector<std::shared_ptr<Job>> left;
    for (const auto& [id, job] : jobs_.all()) left.push_back(job);
    for (auto& job : left) {
      if (job->colls.empty()) {
        jobs_.Fail(job,
                   {Code::kUnavailable, "the server is shutting down; this job can start no new collectives on it"});
      } else {
        jobs_.Fail(job, {Code::kUnavailable,
                         fmt::format("the server is shutting down and collective #{} of job {} did not finish within "
                                     "the shutdown deadline ({} ms)",
                                     job->colls.begin()->first, job->hex, drain_ms_.load())});
      }
    }
    for (const auto& [cs, owned] : loop_.conns()) {
      if (!cs->job) loop_.SendErrorAndClose(cs, UnavailableError("the server is shutting down"), 0);
    }
    loop_.FlushDirty();
    farewell_until_ = now + std::chrono::seconds(2);
  }
  // Give the error messages a moment to leave.
  return !loop_.HasPendingWrites() || now >= farewell_until_;
}

}  // namespace optcast::server
