// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/server.h"

#include <fmt/format.h>
#include <malloc.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "observe/trace.h"
#include "server/admission.h"
#include "server/buffer_pool.h"
#include "server/collectives.h"
#include "server/connection_loop.h"
#include "server/failover.h"
#include "server/job_table.h"
#include "server/reduction_dispatcher.h"
#include "server/server_metrics.h"
#include "server/tree_relay.h"
#include "transport/kind.h"
#include "transport/posix/traffic_class.h"

namespace optcast::server {
namespace {

// Cores this process may run on (its affinity mask, which containers and taskset narrow).
unsigned UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::thread::hardware_concurrency();
}

uint32_t DefaultMaxConnections() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 65536;
  // Leave room for the listener, the poller, logs and whatever else the process opens.
  return rl.rlim_cur > 128 ? static_cast<uint32_t>(std::min<rlim_t>(rl.rlim_cur - 64, UINT32_MAX)) : 64;
}

ServerOptions WithDefaults(ServerOptions o) {
  if (o.memory_limit == 0) o.memory_limit = DefaultServerMemoryLimit();
  if (o.job_memory_limit == 0) o.job_memory_limit = o.memory_limit;
  if (o.max_connections == 0) o.max_connections = DefaultMaxConnections();
  return o;
}

}  // namespace

// The server's parts, wired together, and the event loop that drives them: the connection loop
// reads messages, which go to admission, the collectives or the tree; every 100 ms a sweep
// enforces the timeouts; a drain ends the loop gracefully.
class Server::Impl : public ConnectionLoop::Events {
 public:
  explicit Impl(ServerOptions o)
      : opts_(WithDefaults(std::move(o))),
        loop_(opts_, metrics_, *this),
        jobs_(opts_, metrics_, loop_),
        dispatcher_(metrics_, jobs_, pool_, opts_.reduce_offload_share),
        collectives_(opts_, metrics_, loop_, jobs_, pool_, dispatcher_),
        tree_(opts_, metrics_, loop_, jobs_, pool_, collectives_),
        admission_(opts_, metrics_, loop_, jobs_, tree_),
        failover_(metrics_, loop_, jobs_, collectives_) {
    dispatcher_.set_sink(&collectives_);
  }

  // The workers go first, while the tasks and buffers they use still exist; then the connections,
  // while the jobs and parts their pending messages' callbacks reach still exist.
  ~Impl() override {
    dispatcher_.StopWorkers();
    loop_.DestroyAll();
  }

  Status Start();
  Status Run();
  uint16_t port() const { return loop_.port(); }

  void Stop() {
    stop_.store(true);
    loop_.Wake();
  }

  void Drain(std::chrono::milliseconds deadline) {
    drain_ms_.store(std::max<int64_t>(deadline.count(), 0));
    drain_requested_.store(true);
    loop_.Wake();
  }

  const observe::Registry& metrics() const { return metrics_.registry(); }
  ServerStats stats() const;

  // ---- ConnectionLoop::Events ----
  Status OnMessageMeta(transport::Connection& c, std::span<const uint8_t> meta, uint64_t payload_len,
                       uint8_t** payload_dst) override;
  Status OnMessageComplete(transport::Connection& c) override;
  void OnConnectionLost(ConnState* cs, const Status& why) override;
  void OnWatched(void* /*tag*/) override { dispatcher_.CollectFinished(); }

 private:
  void Sweep();
  // A server with nothing in flight for a second returns its cached buffers to the system, so
  // that a burst of large jobs does not leave it holding their memory for good.
  void MaybeGiveBackMemory(Clock::time_point now);
  void UpdateLevels();
  // Graceful shutdown: no new connections or collectives, then, once the collectives in flight
  // are done or the deadline passed, an error to whatever is left.
  void BeginDrain();
  // One drain step per loop iteration; true once the server may exit.
  bool DrainStep();

  const ServerOptions opts_;
  ServerMetrics metrics_;
  BufferPool pool_;
  ConnectionLoop loop_;
  JobTable jobs_;
  ReductionDispatcher dispatcher_;
  Collectives collectives_;
  TreeRelay tree_;
  Admission admission_;
  FailoverCoordinator failover_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> drain_requested_{false};
  std::atomic<int64_t> drain_ms_{0};
  bool drain_farewell_sent_ = false;
  Clock::time_point drain_deadline_{}, farewell_until_{};
};

Status Server::Impl::Start() {
  if (opts_.secret.empty() && !opts_.insecure && !transport::IsLoopbackHost(opts_.listen.host)) {
    return InvalidArgument(fmt::format(
        "refusing to listen on {} without a secret: anyone who reaches it could join or disturb any job; set "
        "OPTCAST_SECRET_FILE (or --secret-file) on servers and workers, listen on 127.0.0.1, or pass --insecure "
        "on a network you trust",
        opts_.listen.host));
  }
  if (const int dscp = opts_.transport.tcp.latency_dscp; dscp < 0 || dscp > transport::posix::kMaxDscp) {
    return InvalidArgument(fmt::format("latency_dscp {} is not a DSCP; use 0-63 (0: mark nothing)", dscp));
  }
  OPTCAST_RETURN_IF_ERROR(tree_.ResolveParent());
  OPTCAST_RETURN_IF_ERROR(loop_.Listen());
  const int threads = opts_.reduce_threads >= 0 ? opts_.reduce_threads : ReduceWorkers::ThreadsForCores(UsableCores());
  // Descriptors now (a server's idle descriptor count is fixed once it listens), threads in Run().
  dispatcher_.CreateWorkers(threads);
  if (ReduceWorkers* workers = dispatcher_.workers()) {
    OPTCAST_RETURN_IF_ERROR(loop_.Watch(workers->wake_fd(), workers));
  }
  Log().info("listening on {}:{} over {} ({} reduction thread{})", opts_.listen.host, loop_.port(),
             loop_.TransportName(), threads, threads == 1 ? "" : "s");
  if (opts_.secret.empty()) {
    Log().warn("no secret configured: hellos are not authenticated{}",
               transport::IsLoopbackHost(opts_.listen.host) ? " (listening on loopback only)"
                                                            : "; INSECURE: any host that reaches this port can "
                                                              "join or disturb jobs");
  }
  return Status::Ok();
}

Status Server::Impl::Run() {
  observe::TraceThreadName("server event loop");
  // The worker threads start here, not in Start(): a process may fork between the two (tests
  // do), and a fork should find no thread but the caller's.
  dispatcher_.StartWorkers();
  auto next_sweep = Clock::now();
  while (!stop_.load()) {
    OPTCAST_RETURN_IF_ERROR(loop_.Poll(100));
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

ServerStats Server::Impl::stats() const {
  ServerStats s;
  s.jobs_active = metrics_.jobs();
  s.connections = metrics_.connections();
  s.jobs_failed = metrics_.jobs_failed();
  s.chunks_reduced = metrics_.chunks_done();
  s.chunks_reduced_on_workers = metrics_.reduced_on_workers();
  s.bytes_in = metrics_.bytes_in();
  s.bytes_out = metrics_.bytes_out();
  s.buffer_bytes_outstanding = metrics_.buffer_bytes();
  s.memory_used = jobs_.memory().used();
  s.connections_refused = metrics_.connections_refused();
  s.limit_failures = metrics_.limit_failures();
  s.draining = metrics_.draining();
  s.auth_failures = metrics_.auth_failures();
  s.reduce_threads = metrics_.reduce_threads();
  return s;
}

Status Server::Impl::OnMessageMeta(transport::Connection& c, std::span<const uint8_t> meta, uint64_t payload_len,
                                   uint8_t** payload_dst) {
  auto* cs = static_cast<ConnState*>(c.user_data);
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
      return admission_.OnHello(cs, msg.hello);
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

Status Server::Impl::OnMessageComplete(transport::Connection& c) {
  auto* cs = static_cast<ConnState*>(c.user_data);
  cs->rx_dst.reset();  // the payload has landed: the transport writes there no more
  if (cs->upstream_of) return tree_.OnUpstreamComplete(cs);
  return collectives_.OnChunkComplete(cs);
}

void Server::Impl::OnConnectionLost(ConnState* cs, const Status& why) {
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

void Server::Impl::Sweep() {
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

void Server::Impl::MaybeGiveBackMemory(Clock::time_point now) {
  if (pool_.cached_bytes() == 0 || now - collectives_.last_activity() < std::chrono::seconds(1)) return;
  if (jobs_.AnyInFlight()) return;
  pool_.Trim();
  GiveFreedHeapBackToTheSystem();
}

void Server::Impl::UpdateLevels() {
  ServerMetrics::Levels l;
  l.jobs = static_cast<int64_t>(jobs_.all().size());
  loop_.AddLevels(&l);
  for (const auto& [id, job] : jobs_.all()) {
    for (const auto& [seq, coll] : job->colls) l.chunks_pending += static_cast<int64_t>(coll.slots.size());
  }
  l.buffer_bytes = static_cast<int64_t>(pool_.outstanding_bytes());
  metrics_.SetLevels(l);
}

void Server::Impl::BeginDrain() {
  drain_deadline_ = Clock::now() + std::chrono::milliseconds(drain_ms_.load());
  loop_.CloseListener();
  jobs_.set_draining();
  metrics_.SetDraining();
  Log().info(
      "shutting down: no new connections or collectives; waiting up to {} ms for {} job(s) with collectives in "
      "flight",
      drain_ms_.load(), jobs_.InFlight());
}

bool Server::Impl::DrainStep() {
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

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Server::~Server() = default;
Status Server::Start() { return impl_->Start(); }
uint16_t Server::port() const { return impl_->port(); }
Status Server::Run() { return impl_->Run(); }
void Server::Stop() { impl_->Stop(); }
void Server::Drain(std::chrono::milliseconds deadline) { impl_->Drain(deadline); }
ServerStats Server::stats() const { return impl_->stats(); }
const observe::Registry& Server::metrics() const { return impl_->metrics(); }

}  // namespace optcast::server
