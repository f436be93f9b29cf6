// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/server.h"

#include <fmt/format.h>
#include <malloc.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <deque>
#include <thread>
#include <unordered_map>

#include "auth/proof.h"
#include "common/log.h"
#include "observe/trace.h"
#include "reduce/combine.h"
#include "server/buffer_pool.h"
#include "server/job.h"
#include "server/reduce_workers.h"
#include "server/server_metrics.h"
#include "server/tree_math.h"
#include "transport/kind.h"
#include "transport/ofi/listener.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/poller.h"

namespace optcast::server {

using transport::Connection;
using transport::OutMessage;

// Per-connection state. A connection is one rank of one job once it has said hello.
struct ConnState {
  // Where the chunk now arriving lands. A transport that receives straight into memory (ofi) may
  // go on writing there after the job fails and frees its slots, until the message completes or
  // the connection is destroyed; so the buffer is held here, and declared before `conn` so that
  // it outlives the connection.
  std::shared_ptr<uint8_t> rx_dst;
  std::unique_ptr<Connection> conn;
  std::shared_ptr<Job> job;
  uint32_t rank = 0;
  bool closing = false;  // an error was sent: flush, half-close, drain until the peer closes
  bool write_shut = false;
  bool dead = false;   // destroy at the end of this loop iteration
  bool dirty = false;  // has queued writes to flush
  bool want_read = true;
  bool want_write = false;
  Clock::time_point accepted_at = Clock::now();
  Clock::time_point close_by{};
  // A hello waiting for its proof of the deployment secret.
  bool challenged = false;
  wire::Hello pending_hello{};
  wire::Nonce nonce{};
  // The chunk whose payload is being received.
  uint64_t rx_seq = 0;
  SlotKey rx_key{};
  bool rx_chunk = false;
  // Tracing: this connection's tracks (receiving, sending; they overlap in time), when its chunk
  // began arriving, when its last send ended.
  int trace_track = 0;
  int trace_track_tx = 0;
  double rx_start_us = 0;
  double tx_free_us = 0;
  // Aggregation tree: this connection is a downstream server of its job (its chunks carry
  // partials), or this server's own link to the parent server for `upstream_of`.
  bool server_member = false;
  std::shared_ptr<Job> upstream_of;
};

namespace {

// A tree job's rank count costs nothing per rank at any one server; the cap only keeps rank
// arithmetic far from overflow.
constexpr uint32_t kMaxTreeRanks = 1u << 24;

struct JobIdHash {
  size_t operator()(const wire::JobIdBytes& id) const {
    size_t h = 1469598103934665603ull;
    for (uint8_t b : id) h = (h ^ b) * 1099511628211ull;
    return h;
  }
};

// Which reductions go to the workers: those of collectives with more than one chunk on this
// server (a pipeline, where the loop keeps receiving while workers reduce) that read at least
// this much (all ranks' contributions together). A collective of one chunk is latency-bound:
// waking a worker would cost more than the reduction itself, so the loop reduces it.
constexpr uint64_t kOffloadBytes = 64 * 1024;

// Finished chunk slots kept for reuse (more are freed): enough for every chunk in flight of
// many jobs.
constexpr size_t kMaxFreeSlots = 4096;

// Cores this process may run on (its affinity mask, which containers and taskset narrow).
unsigned UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::thread::hardware_concurrency();
}

// A chunk's reduction on a worker. It holds the job and the contributions, so they outlive a
// job that fails meanwhile; the loop drops them when it takes the task back.
struct ChunkReduction : ReduceTask {
  std::shared_ptr<Job> job;
  uint64_t coll_seq = 0;
  SlotKey key{};
  std::vector<std::shared_ptr<uint8_t>> keep;

  // Aggregation tree (server/tree_math.h): the members' contributions, some of them partials
  // from downstream servers, combine into a partial in `partial`; the root also finishes it.
  bool tree = false;
  std::unique_ptr<bool[]> is_partial;
  size_t is_partial_capacity = 0;
  bool finish = false;
  uint32_t nranks = 0;
  std::shared_ptr<uint8_t> partial;
  std::vector<uint8_t> scratch;

  Status Reduce() override {
    if (!tree) return ReduceTask::Reduce();
    OPTCAST_RETURN_IF_ERROR(CombineToPartial(dtype, op, srcs.data(), is_partial.get(), static_cast<int>(srcs.size()),
                                             partial.get(), count, &scratch));
    return finish ? FinishPartial(dtype, op, partial.get(), count, nranks) : Status::Ok();
  }
};

uint32_t DefaultMaxConnections() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 65536;
  // Leave room for the listener, the poller, logs and whatever else the process opens.
  return rl.rlim_cur > 128 ? static_cast<uint32_t>(std::min<rlim_t>(rl.rlim_cur - 64, UINT32_MAX)) : 64;
}

std::string Bytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30) && b % (uint64_t{1} << 30) == 0) return fmt::format("{}G", b >> 30);
  if (b >= (uint64_t{1} << 20) && b % (uint64_t{1} << 20) == 0) return fmt::format("{}M", b >> 20);
  if (b >= (uint64_t{1} << 10) && b % (uint64_t{1} << 10) == 0) return fmt::format("{}K", b >> 10);
  return fmt::format("{}", b);
}

}  // namespace

class Server::Impl : public transport::MessageHandler {
 public:
  explicit Impl(ServerOptions o) : opts_(std::move(o)) {
    if (opts_.memory_limit == 0) opts_.memory_limit = DefaultServerMemoryLimit();
    if (opts_.job_memory_limit == 0) opts_.job_memory_limit = opts_.memory_limit;
    if (opts_.max_connections == 0) opts_.max_connections = DefaultMaxConnections();
    memory_ = std::make_shared<MemoryBudget>("--memory-limit", opts_.memory_limit);
  }

  Status Start() {
    if (opts_.secret.empty() && !opts_.insecure && !transport::IsLoopbackHost(opts_.listen.host)) {
      return InvalidArgument(fmt::format(
          "refusing to listen on {} without a secret: anyone who reaches it could join or disturb any job; set "
          "OPTCAST_SECRET_FILE (or --secret-file) on servers and workers, listen on 127.0.0.1, or pass --insecure "
          "on a network you trust",
          opts_.listen.host));
    }
    if (opts_.upstream) OPTCAST_RETURN_IF_ERROR(ResolveParent(*opts_.upstream, &parent_addrs_));
    OPTCAST_RETURN_IF_ERROR(transport::Listen(opts_.transport, opts_.listen, &listener_, opts_.ofi_provider));
    port_ = listener_->port();
    OPTCAST_RETURN_IF_ERROR(poller_.Add(listener_->fd(), listener_.get(), true, false));
    OPTCAST_RETURN_IF_ERROR(poller_.Add(waker_.fd(), &waker_, true, false));
    const int threads =
        opts_.reduce_threads >= 0 ? opts_.reduce_threads : ReduceWorkers::ThreadsForCores(UsableCores());
    if (threads > 0) {
      // Descriptors now (a server's idle descriptor count is fixed once it listens), threads in Run().
      workers_ = std::make_unique<ReduceWorkers>(threads, /*start_now=*/false);
      OPTCAST_RETURN_IF_ERROR(poller_.Add(workers_->wake_fd(), workers_.get(), true, false));
    }
    std::string over = transport::KindName(opts_.transport);
    if (const auto* fl = dynamic_cast<const transport::ofi::FabricListener*>(listener_.get())) {
      over += " (provider " + fl->fabric().provider() + ")";
    }
    Log().info("listening on {}:{} over {} ({} reduction thread{})", opts_.listen.host, port_, over, threads,
               threads == 1 ? "" : "s");
    if (opts_.secret.empty()) {
      Log().warn("no secret configured: hellos are not authenticated{}",
                 transport::IsLoopbackHost(opts_.listen.host) ? " (listening on loopback only)"
                                                              : "; INSECURE: any host that reaches this port can "
                                                                "join or disturb jobs");
    }
    return Status::Ok();
  }

  uint16_t port() const { return port_; }

  void Stop() {
    stop_.store(true);
    waker_.Wake();
  }

  void Drain(std::chrono::milliseconds deadline) {
    drain_ms_.store(std::max<int64_t>(deadline.count(), 0));
    drain_requested_.store(true);
    waker_.Wake();
  }

  const observe::Registry& metrics() const { return metrics_.registry(); }

  ServerStats stats() const {
    ServerStats s;
    s.jobs_active = metrics_.jobs();
    s.connections = metrics_.connections();
    s.jobs_failed = metrics_.jobs_failed();
    s.chunks_reduced = metrics_.chunks_done();
    s.bytes_in = metrics_.bytes_in();
    s.bytes_out = metrics_.bytes_out();
    s.buffer_bytes_outstanding = metrics_.buffer_bytes();
    s.memory_used = memory_->used();
    s.connections_refused = metrics_.connections_refused();
    s.limit_failures = metrics_.limit_failures();
    s.draining = metrics_.draining();
    s.auth_failures = metrics_.auth_failures();
    s.reduce_threads = metrics_.reduce_threads();
    return s;
  }

  Status Run() {
    observe::TraceThreadName("server event loop");
    // The worker threads start here, not in Start(): a process may fork between the two (tests
    // do), and a fork should find no thread but the caller's.
    if (workers_) {
      workers_->Start();
      metrics_.SetReduceThreads(static_cast<uint64_t>(workers_->threads()));
    }
    std::vector<transport::Poller::Event> events;
    auto next_sweep = Clock::now();
    while (!stop_.load()) {
      OPTCAST_RETURN_IF_ERROR(poller_.Wait(100, &events));
      for (const auto& ev : events) {
        if (listener_ && ev.tag == listener_.get()) {
          AcceptAll();
        } else if (ev.tag == &waker_) {
          waker_.Drain();
        } else if (workers_ && ev.tag == workers_.get()) {
          CollectReductions();
        } else {
          auto* cs = static_cast<ConnState*>(ev.tag);
          if (cs->dead) continue;
          if (ev.readable && cs->closing) {
            // Lingering close: a peer still sending must not get a reset that would throw
            // away the error message waiting in its receive queue.
            if (!cs->conn->DiscardAvailable()) cs->dead = true;
          } else if (ev.readable && cs->want_read) {
            HandleReadable(cs);
          }
          if ((ev.writable || cs->conn->WritesSignalReadable()) && !cs->dead) MarkDirty(cs);
          if (ev.hangup && !ev.readable && !cs->dead && !cs->closing) {
            OnConnectionLost(cs, UnavailableError("connection reset by " + cs->conn->peer()));
          }
        }
      }
      FlushDirty();
      if (Clock::now() >= next_sweep) {
        SweepTimeouts();
        UpdateLevels();
        next_sweep = Clock::now() + std::chrono::milliseconds(100);
      }
      ReapDead();
      metrics_.SetBufferBytes(pool_.outstanding_bytes());
      if (drain_requested_.load() && !draining_) BeginDrain();
      if (draining_ && DrainStep()) break;
    }
    return Status::Ok();
  }

  ~Impl() override {
    workers_.reset();  // joins the workers while the tasks and buffers they use still exist
    for (auto& [cs, owned] : conns_) owned.reset();
    jobs_.clear();
  }

  // ---- MessageHandler ----

  Status OnMessageMeta(Connection& c, std::span<const uint8_t> meta, uint64_t payload_len,
                       uint8_t** payload_dst) override {
    auto* cs = static_cast<ConnState*>(c.user_data);
    wire::Message msg;
    OPTCAST_RETURN_IF_ERROR(wire::Decode(meta, &msg));
    if (cs->upstream_of) return OnUpstreamMeta(cs, msg, payload_len, payload_dst);
    switch (msg.type) {
      case wire::MsgType::kHello:
        if (payload_len != 0) return ProtocolError("hello carries a payload");
        return OnHello(cs, msg.hello);
      case wire::MsgType::kProof:
        if (payload_len != 0) return ProtocolError("proof carries a payload");
        return OnProof(cs, msg.proof);
      case wire::MsgType::kChunk: return OnChunkMeta(cs, msg.chunk, payload_len, payload_dst);
      case wire::MsgType::kBye:
        if (!cs->job) return ProtocolError("goodbye before hello");
        return Status::Ok();
      case wire::MsgType::kGrow:
      case wire::MsgType::kError:
        if (cs->job && cs->server_member) return OnDownstreamServerMessage(cs, msg);
        [[fallthrough]];
      default: return ProtocolError(fmt::format("a client may not send message type {}", static_cast<int>(msg.type)));
    }
  }

  Status OnMessageComplete(Connection& c) override {
    auto* cs = static_cast<ConnState*>(c.user_data);
    cs->rx_dst.reset();  // the payload has landed: the transport writes there no more
    if (cs->upstream_of) return OnUpstreamComplete(cs);
    if (!cs->rx_chunk) return Status::Ok();
    cs->rx_chunk = false;
    Job* job = cs->job.get();
    if (job == nullptr || job->failed) return Status::Ok();
    auto cit = job->colls.find(cs->rx_seq);
    if (cit == job->colls.end()) return InternalError("collective vanished while receiving");
    auto sit = cit->second.slots.find(cs->rx_key);
    if (sit == cit->second.slots.end()) return InternalError("chunk slot vanished while receiving");
    Slot& slot = sit->second;
    slot.have[job->SeatOf(cs->rank)] = 1;
    ++slot.arrived;
    job->last_progress = Clock::now();
    last_activity_ = job->last_progress;
    const uint64_t bytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(cit->second.desc.dtype);
    metrics_.BytesIn(bytes);
    if (cs->trace_track != 0) {
      observe::TraceComplete("recv", "server", cs->rx_start_us, observe::TraceNowUs(),
                             ChunkArgs(cit->second.desc, slot.ref, bytes), cs->trace_track);
    }
    if (SlotFull(*job, slot)) CompleteSlot(cs->job, cit, sit);
    return Status::Ok();
  }

 private:
  // ---- graceful shutdown ----

  void BeginDrain() {
    draining_ = true;
    drain_deadline_ = Clock::now() + std::chrono::milliseconds(drain_ms_.load());
    poller_.Remove(listener_->fd());
    listener_.reset();
    metrics_.SetDraining();
    size_t open = 0;
    for (auto& [id, job] : jobs_) open += job->colls.empty() ? 0 : 1;
    Log().info(
        "shutting down: no new connections or collectives; waiting up to {} ms for {} job(s) with "
        "collectives in flight",
        drain_ms_.load(), open);
  }

  // One drain step per loop iteration; true once the server may exit.
  bool DrainStep() {
    const auto now = Clock::now();
    bool busy = false;
    for (auto& [id, job] : jobs_) busy = busy || !job->colls.empty();
    if (busy && now < drain_deadline_) return false;
    if (!drain_farewell_sent_) {
      // Whatever is left: idle jobs learn the server is gone, unfinished ones why they failed.
      drain_farewell_sent_ = true;
      std::vector<std::shared_ptr<Job>> left;
      for (auto& [id, job] : jobs_) left.push_back(job);
      for (auto& job : left) {
        if (job->colls.empty()) {
          FailJob(job, Code::kUnavailable, "the server is shutting down; this job can start no new collectives on it");
        } else {
          FailJob(job, Code::kUnavailable,
                  fmt::format("the server is shutting down and collective #{} of job {} did not finish within the "
                              "shutdown deadline ({} ms)",
                              job->colls.begin()->first, job->hex, drain_ms_.load()));
        }
      }
      for (auto& [cs, owned] : conns_) {
        if (!cs->job) SendErrorAndClose(cs, UnavailableError("the server is shutting down"), 0);
      }
      FlushDirty();
      farewell_until_ = now + std::chrono::seconds(2);
    }
    // Give the error messages a moment to leave.
    bool pending = false;
    for (auto& [cs, owned] : conns_) pending = pending || (!cs->dead && cs->conn->HasPendingWrites());
    return !pending || now >= farewell_until_;
  }

  // ---- connection lifecycle ----

  void AcceptAll() {
    for (;;) {
      std::unique_ptr<Connection> conn;
      Status st = listener_->Accept(opts_.max_payload, &conn);
      if (!st.ok()) {
        if (st.code() == Code::kResourceExhausted) PauseAccepting(st);
        if (st.code() == Code::kResourceExhausted || st.code() == Code::kUnavailable) return;
        Log().warn("dropped a connection: {}", st.message());
        continue;
      }
      const std::string peer = conn->peer();
      auto cs = std::make_unique<ConnState>();
      cs->conn = std::move(conn);
      cs->conn->user_data = cs.get();
      if (!poller_.Add(cs->conn->fd(), cs.get(), true, false).ok()) continue;
      Log().debug("connection from {}", peer);
      ConnState* raw = cs.get();
      conns_.emplace(raw, std::move(cs));
      metrics_.SetConnections(conns_.size());
      if (conns_.size() > opts_.max_connections) {
        metrics_.ConnectionRefused();
        (void)Refuse(raw, ResourceExhausted(fmt::format("the server's connection limit (--max-connections={}) is "
                                                        "reached; raise it, or spread jobs over more servers",
                                                        opts_.max_connections)));
      }
    }
  }

  void HandleReadable(ConnState* cs) {
    Status st = cs->conn->ReadAvailable(*this);
    if (st.ok() || cs->closing || cs->dead) return;
    OnConnectionLost(cs, st);
  }

  // Reading failed: the peer closed, sent garbage, or broke a rule.
  void OnConnectionLost(ConnState* cs, const Status& why) {
    if (cs->upstream_of) {
      std::shared_ptr<Job> job = std::move(cs->upstream_of);
      job->tree->up = nullptr;
      cs->dead = true;
      OnUpstreamLost(job, why);
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
        SendErrorAndClose(cs, why, 0);
      }
      return;
    }
    if (why.code() == Code::kUnavailable) {
      job->Detach(cs->rank, cs, /*departed=*/true);
      cs->job.reset();
      cs->dead = true;
      if (!job->colls.empty()) {
        const uint64_t seq = job->colls.begin()->first;
        FailJob(job, Code::kPeerFailed,
                fmt::format("{} {} ({}) disconnected during collective #{} of job {}: {}; the other ranks "
                            "cannot complete it",
                            cs->server_member ? "the downstream server that is member" : "rank", cs->rank,
                            cs->conn->peer(), seq, job->hex, why.message()));
      } else {
        Log().info("rank {} left job {}", cs->rank, job->hex);
        MaybeRetireJob(job);
      }
      return;
    }
    FailJob(job, why.code(),
            fmt::format("rank {} ({}) of job {}: {}", cs->rank, cs->conn->peer(), job->hex, why.message()));
  }

  void SendErrorAndClose(ConnState* cs, const Status& st, uint64_t seq) {
    if (cs->closing || cs->dead) return;
    if (!cs->job) metrics_.Error(st.code());  // a job's failure is counted once, in FailJob
    wire::ErrorMsg em{st.code(), seq, st.message()};
    cs->conn->Send(transport::MakeOutMessage(wire::EncodeError(em), nullptr, 0));
    cs->closing = true;
    cs->close_by = Clock::now() + std::chrono::seconds(5);
    MarkDirty(cs);
  }

  void MarkDirty(ConnState* cs) {
    if (!cs->dirty) {
      cs->dirty = true;
      dirty_.push_back(cs);
    }
  }

  void FlushDirty() {
    // Completion callbacks may queue more messages, so the list can grow while we walk it.
    for (size_t i = 0; i < dirty_.size(); ++i) {
      ConnState* cs = dirty_[i];
      cs->dirty = false;
      if (cs->dead) continue;
      Status st = cs->conn->Flush();
      if (!st.ok()) {
        if (cs->closing) {
          cs->dead = true;
        } else {
          OnConnectionLost(cs, st);
        }
        continue;
      }
      const bool want_write = cs->conn->HasPendingWrites();
      const bool want_read = true;  // closing connections are drained (see the event loop)
      if (cs->closing && !want_write && !cs->write_shut) {
        cs->conn->ShutdownWrite();
        cs->write_shut = true;
      }
      if (want_write != cs->want_write || want_read != cs->want_read) {
        cs->want_write = want_write;
        cs->want_read = want_read;
        (void)poller_.Modify(cs->conn->fd(), cs, want_read, want_write);
      }
    }
    dirty_.clear();
  }

  void ReapDead() {
    for (auto it = conns_.begin(); it != conns_.end();) {
      ConnState* cs = it->first;
      if (!cs->dead) {
        ++it;
        continue;
      }
      if (cs->job) cs->job->Detach(cs->rank, cs, /*departed=*/false);
      poller_.Remove(cs->conn->fd());
      it = conns_.erase(it);
    }
    metrics_.SetConnections(conns_.size());
  }

  void SweepTimeouts() {
    const auto now = Clock::now();
    ForgetOldFailures(now);
    MaybeGiveBackMemory(now);
    if (accept_paused_ && !draining_ && now >= accept_resume_at_) {
      accept_paused_ = false;
      (void)poller_.Modify(listener_->fd(), listener_.get(), true, false);
    }
    for (auto& [cs, owned] : conns_) {
      if (cs->dead) continue;
      if (cs->closing && now >= cs->close_by) cs->dead = true;
      if (!cs->job && !cs->upstream_of && !cs->closing && now - cs->accepted_at > opts_.hello_timeout) {
        if (cs->challenged) {
          metrics_.AuthFailure();
          cs->challenged = false;
          SendErrorAndClose(
              cs,
              Status(Code::kUnauthenticated, fmt::format("no proof of the secret within {} ms; this server requires "
                                                         "authentication: set OPTCAST_SECRET_FILE on the workers",
                                                         opts_.hello_timeout.count())),
              0);
        } else {
          SendErrorAndClose(cs,
                            TimeoutError(fmt::format("no hello within {} ms; is this an Optcast client?",
                                                     opts_.hello_timeout.count())),
                            0);
        }
      }
    }
    // A parent that never welcomes this server's hello fails the job below it.
    std::vector<ConnState*> unwelcomed;
    for (auto& [cs, owned] : conns_) {
      if (cs->upstream_of && !cs->closing && !cs->dead && !cs->upstream_of->tree->link->welcomed() &&
          now - cs->accepted_at > opts_.hello_timeout) {
        unwelcomed.push_back(cs);
      }
    }
    for (ConnState* cs : unwelcomed) {
      OnConnectionLost(cs, TimeoutError(fmt::format("no welcome within {} ms", opts_.hello_timeout.count())));
    }
    std::vector<std::shared_ptr<Job>> expired;
    for (auto& [id, job] : jobs_) {
      if (!job->colls.empty() && now - job->last_progress > opts_.job_timeout) expired.push_back(job);
    }
    for (auto& job : expired) {
      const CollState& oldest = job->colls.begin()->second;
      std::vector<uint32_t> missing;
      auto check = [&](uint32_t r) {
        bool lacks = job->ConnOf(r) == nullptr;
        const uint32_t seat = job->SeatOf(r);
        for (const auto& [key, slot] : oldest.slots) {
          const bool expects = oldest.desc.coll != CollType::kAllGather || key.first == r;
          if (expects && (seat >= slot.have.size() || !slot.have[seat])) lacks = true;
        }
        if (lacks) missing.push_back(r);
      };
      if (job->tree) {
        // The members that joined here; the job's other ranks belong to other servers of the tree.
        std::vector<uint32_t> members = job->tree->members.seated();
        std::sort(members.begin(), members.end());
        for (uint32_t r : members) check(r);
      } else {
        for (uint32_t r = 0; r < job->nranks; ++r) check(r);
      }
      FailJob(job, Code::kTimeout,
              fmt::format("collective #{} ({}) of job {} made no progress for {} ms; still waiting for rank(s) "
                          "{}; a rank may be stuck or dead",
                          oldest.desc.coll_seq, DescribeColl(oldest.desc), job->hex, opts_.job_timeout.count(),
                          TreeWaitingFor(*job, missing)));
    }
  }

  // ---- jobs ----

  Status OnHello(ConnState* cs, const wire::Hello& h) {
    if (cs->job || cs->challenged) return ProtocolError("second hello on one connection");
    if (draining_) return Refuse(cs, UnavailableError("the server is shutting down; use another server"));
    if (!opts_.secret.empty()) {
      // The proof covers this nonce, so it is good for this connection and this hello only.
      cs->challenged = true;
      cs->pending_hello = h;
      cs->nonce = auth::NewNonce();
      cs->conn->Send(transport::MakeOutMessage(wire::EncodeChallenge(cs->nonce), nullptr, 0));
      MarkDirty(cs);
      return Status::Ok();
    }
    return Join(cs, h);
  }

  Status OnProof(ConnState* cs, const wire::Mac& proof) {
    if (cs->job || !cs->challenged) return ProtocolError("proof without a challenge; send hello first");
    const wire::Hello h = cs->pending_hello;
    cs->challenged = false;
    if (!auth::VerifyProof(opts_.secret, cs->nonce, h, proof)) {
      metrics_.AuthFailure();
      return Refuse(cs, Status(Code::kUnauthenticated,
                               fmt::format("authentication failed for rank {} of job {}: the hello's proof does not "
                                           "match this server's secret; give workers and servers the same "
                                           "OPTCAST_SECRET_FILE",
                                           h.rank, wire::JobIdHex(h.job_id))));
    }
    return Join(cs, h);
  }

  // Adds an admitted connection to its job as the rank it asked for.
  Status Join(ConnState* cs, const wire::Hello& h) {
    if (auto failed = failed_jobs_.find(h.job_id); failed != failed_jobs_.end()) {
      // A rank arriving after its job failed learns why at once instead of waiting for a timeout.
      return Refuse(cs,
                    Status(failed->second.code, fmt::format("job {} failed before rank {} joined: {}",
                                                            wire::JobIdHex(h.job_id), h.rank, failed->second.text)));
    }
    const std::string hex = wire::JobIdHex(h.job_id);
    auto it = jobs_.find(h.job_id);
    // A tree job (this server has a parent, or a downstream server joins, or joined before) keeps
    // state for its members here only, so its rank count may exceed a server's fan-in.
    const bool tree = opts_.upstream || opts_.tree_root || (h.flags & wire::kHelloFromServer) != 0 ||
                      (it != jobs_.end() && it->second->tree != nullptr);
    // Per-job and per-chunk state grow with the fan-in, and a hello is untrusted input: the cap
    // keeps one job from making every chunk slot allocate megabytes.
    const uint32_t max_ranks = tree ? kMaxTreeRanks : opts_.max_fan_in;
    if (h.nranks == 0 || h.nranks > max_ranks) {
      return Refuse(cs, InvalidArgument(fmt::format(
                            "hello for job {} with nranks={}; a job has 1..{} ranks {}", hex, h.nranks, max_ranks,
                            tree ? "in an aggregation tree"
                                 : "on a flat server (--max-fan-in); larger jobs need an aggregation tree: start "
                                   "servers with --upstream or --topology (a tree's root with --topology too)")));
    }
    if (h.rank >= h.nranks) {
      return Refuse(cs, InvalidArgument(fmt::format("rank {} is out of range for job {} of {} ranks; ranks are "
                                                    "0..{}",
                                                    h.rank, hex, h.nranks, h.nranks - 1)));
    }
    std::shared_ptr<Job> job;
    if (it == jobs_.end()) {
      job = std::make_shared<Job>();
      job->id = h.job_id;
      job->hex = hex;
      job->nranks = h.nranks;
      job->memory = std::make_shared<MemoryBudget>("--job-memory-limit", opts_.job_memory_limit, memory_);
      jobs_.emplace(h.job_id, job);
      metrics_.SetJobs(jobs_.size());
      metrics_.JobCreated();
      Log().info("job {} created ({} ranks)", hex, h.nranks);
      // Too wide to be flat here: a tree job from its first hello, with state per member.
      if (!opts_.upstream && h.nranks > opts_.max_fan_in) job->tree = std::make_unique<TreeState>(h.nranks);
      if (opts_.upstream) {
        if (Status st = OpenUpstream(job, h.rank); !st.ok()) {
          FailJob(job, st.code(), st.message());
          return Refuse(cs, st);
        }
      }
    } else {
      job = it->second;
      if (job->nranks != h.nranks) {
        Status st =
            MismatchError(fmt::format("rank {} joined job {} with nranks={} but the job has nranks={}; every "
                                      "rank must pass the same nranks",
                                      h.rank, hex, h.nranks, job->nranks));
        FailJob(job, st.code(), st.message());
        return Refuse(cs, st);
      }
      auto taken = job->participants.find(h.rank);
      if (taken != job->participants.end() && (taken->second.conn != nullptr || taken->second.departed)) {
        const std::string holder = taken->second.conn ? taken->second.conn->conn->peer() : "an earlier connection";
        return Refuse(cs, InvalidArgument(fmt::format("rank {} of job {} is already taken by {}; every process "
                                                      "needs its own rank",
                                                      h.rank, hex, holder)));
      }
      if (taken == job->participants.end() && job->participants.size() >= opts_.max_fan_in) {
        return Refuse(cs, ResourceExhausted(fmt::format("rank {} cannot join job {}: this server already combines {} "
                                                        "members of it, its limit (--max-fan-in={}); spread the "
                                                        "job's ranks over more leaf servers of the tree",
                                                        h.rank, hex, job->participants.size(), opts_.max_fan_in)));
      }
    }
    job->Attach(h.rank, cs);
    cs->job = job;
    cs->rank = h.rank;
    cs->server_member = (h.flags & wire::kHelloFromServer) != 0;
    if (job->tree || cs->server_member) {
      if (Status st = TreeJoin(job, h.rank, cs->server_member); !st.ok()) {
        FailJob(job, st.code(), st.message());
        return Status(Code::kCancelled, "job failed");
      }
    }
    if (observe::TraceOn()) {
      const std::string who = fmt::format("job {} rank {} ({})", hex.substr(0, 8), h.rank, cs->conn->peer());
      cs->trace_track = observe::NewTraceTrack(who + " recv");
      cs->trace_track_tx = observe::NewTraceTrack(who + " send");
    }
    wire::Welcome w{opts_.max_payload, static_cast<uint32_t>(opts_.job_timeout.count())};
    cs->conn->Send(transport::MakeOutMessage(wire::EncodeWelcome(w), nullptr, 0));
    MarkDirty(cs);
    Log().debug("rank {} of job {} joined from {}", h.rank, hex, cs->conn->peer());
    return Status::Ok();
  }

  // Refuses a connection without touching any job; stops reading from it.
  Status Refuse(ConnState* cs, const Status& st) {
    Log().warn("refusing {}: {}", cs->conn->peer(), st.message());
    SendErrorAndClose(cs, st, 0);
    return Status(Code::kCancelled, "connection refused");
  }

  Status OnChunkMeta(ConnState* cs, const wire::Chunk& chunk, uint64_t payload_len, uint8_t** payload_dst) {
    if (!cs->job) return ProtocolError("data before hello; say hello first");
    std::shared_ptr<Job> job = cs->job;
    const wire::CollDesc& d = chunk.desc;
    OPTCAST_RETURN_IF_ERROR(ValidateChunk(chunk, job->nranks, cs->rank));
    if (job->tree && d.coll != CollType::kAllReduce) {
      FailJob(job, Code::kInvalidArgument,
              fmt::format("collective #{} of job {} is a {}, but an aggregation tree carries only allreduce; run "
                          "{} over a flat server list (OPTCAST_SERVERS naming servers without --upstream)",
                          d.coll_seq, job->hex, CollTypeName(d.coll), CollTypeName(d.coll)));
      return Status(Code::kCancelled, "job failed");
    }
    // A downstream server sends partials, which may be wider than the elements (tree_math.h).
    const DataType wire_type = cs->server_member ? PartialType(d.dtype, d.op) : d.dtype;
    const uint64_t expect_bytes = static_cast<uint64_t>(chunk.ref.count) * DataTypeSize(wire_type);
    if (payload_len != expect_bytes) {
      return ProtocolError(fmt::format("chunk of {} {} carries {} bytes instead of {}", chunk.ref.count,
                                       DataTypeName(wire_type), payload_len, expect_bytes));
    }
    if (job->departed_count > 0 && job->colls.find(d.coll_seq) == job->colls.end()) {
      const uint32_t r = job->FirstDeparted();
      FailJob(job, Code::kPeerFailed,
              fmt::format("rank {} has left job {}, so collective #{} cannot complete", r, job->hex, d.coll_seq));
      return Status(Code::kCancelled, "job failed");
    }
    Participant& sender = job->participants.at(cs->rank);
    if (sender.open_chunks >= opts_.max_open_chunks_per_rank) {
      return FailJobForLimit(job, fmt::format("rank {} of job {} has {} chunks on this server without an answer, the "
                                              "limit (--max-open-chunks={}); lower OPTCAST_WINDOW, or look for a "
                                              "rank that stopped calling collectives while this one ran ahead",
                                              cs->rank, job->hex, sender.open_chunks, opts_.max_open_chunks_per_rank));
    }
    auto cit = job->colls.find(d.coll_seq);
    if (cit == job->colls.end() && draining_) {
      FailJob(
          job, Code::kUnavailable,
          fmt::format("the server is shutting down; collective #{} of job {} was not started", d.coll_seq, job->hex));
      return Status(Code::kCancelled, "job failed");
    }
    if (cit == job->colls.end()) {
      // Charged as members join it (below): a tree's seats grow until it is sealed.
      const uint64_t state_bytes = CollStateBytes(0);
      OPTCAST_RETURN_IF_ERROR(ChargeState(job, state_bytes, "collective"));
      cit = job->colls.try_emplace(d.coll_seq).first;
      CollState& coll = cit->second;
      coll.desc = d;
      coll.first_rank = cs->rank;
      coll.state_bytes = state_bytes;
      job->last_progress = Clock::now();
    }
    CollState& coll = cit->second;
    if (!(coll.desc == d)) {
      const std::string why = DescribeMismatch(coll.desc, coll.first_rank, d, cs->rank);
      FailJob(job, Code::kMismatch, why);
      return Status(Code::kCancelled, "job failed");
    }
    if (coll.joined.count(cs->rank) == 0) {
      const uint64_t member_bytes = CollStateBytes(1) - CollStateBytes(0);
      OPTCAST_RETURN_IF_ERROR(ChargeState(job, member_bytes, "collective"));
      coll.state_bytes += member_bytes;
      coll.joined.insert(cs->rank);
      // All-gather chunks that completed before this rank issued the collective.
      for (auto& delivery : coll.ag_waiting) {
        SendAgChunk(job, cs->rank, delivery);
        --delivery->not_joined;
      }
      std::erase_if(coll.ag_waiting, [](const auto& dl) { return dl->not_joined == 0; });
    }
    const SlotKey key{chunk.ref.segment, chunk.ref.offset};
    auto sit = coll.slots.find(key);
    if (sit == coll.slots.end()) {
      const uint32_t seats = job->Seats();
      OPTCAST_RETURN_IF_ERROR(ChargeState(job, SlotStateBytes(seats), "chunk"));
      sit = NewSlot(&coll.slots, key);
      Slot& slot = sit->second;
      slot.arrived = 0;
      slot.ref = chunk.ref;
      slot.expected = d.coll == CollType::kAllGather ? 1 : job->nranks;
      slot.contribs.resize(d.coll == CollType::kAllGather ? 1 : seats);
      slot.have.assign(seats, 0);
      slot.first_arrival = Clock::now();
      slot.state_bytes = SlotStateBytes(seats);
    } else {
      Slot& slot = sit->second;
      if (slot.ref.count != chunk.ref.count) {
        FailJob(job, Code::kMismatch,
                fmt::format("ranks cut collective #{} differently: the chunk at element {} has {} elements from "
                            "one rank and {} from rank {}; use the same chunk size on every rank",
                            d.coll_seq, chunk.ref.offset, slot.ref.count, chunk.ref.count, cs->rank));
        return Status(Code::kCancelled, "job failed");
      }
      if (job->tree && job->SeatOf(cs->rank) >= slot.have.size()) {
        // A member that joined this tree after the slot was opened (the job is not sealed yet).
        slot.have.resize(job->Seats(), 0);
        slot.contribs.resize(job->Seats());
      }
      const size_t idx = d.coll == CollType::kAllGather ? 0 : job->SeatOf(cs->rank);
      if (slot.have[job->SeatOf(cs->rank)] || slot.contribs[idx]) {
        return ProtocolError(fmt::format("rank {} sent the chunk at element {} of collective #{} twice", cs->rank,
                                         chunk.ref.offset, d.coll_seq));
      }
    }
    Slot& slot = sit->second;
    const size_t idx = d.coll == CollType::kAllGather ? 0 : job->SeatOf(cs->rank);
    const uint64_t capacity = BufferPool::CapacityFor(expect_bytes);
    const MemoryBudget* refused = nullptr;
    if (!job->memory->TryCharge(capacity, &refused)) return FailJobForMemory(job, *refused, capacity, "a chunk");
    auto buf = pool_.Get(expect_bytes, job->memory);
    if (!buf) {
      return ResourceExhausted(fmt::format("cannot allocate {} bytes for a chunk", expect_bytes));
    }
    ++sender.open_chunks;
    slot.contribs[idx] = buf;
    cs->rx_dst = buf;
    *payload_dst = buf.get();
    if (cs->trace_track != 0) cs->rx_start_us = observe::TraceNowUs();
    cs->rx_chunk = true;
    cs->rx_seq = d.coll_seq;
    cs->rx_key = key;
    return Status::Ok();
  }

  void SendTo(Job& job, uint32_t rank, OutMessage msg) {
    ConnState* cs = job.ConnOf(rank);
    if (cs == nullptr || cs->closing || cs->dead) return;
    metrics_.BytesOut(msg.payload_len);
    if (cs->trace_track != 0) TraceSend(cs, &msg);
    cs->conn->Send(std::move(msg));
    MarkDirty(cs);
  }

  void CompleteSlot(const std::shared_ptr<Job>& job, std::map<uint64_t, CollState>::iterator cit,
                    std::map<SlotKey, Slot>::iterator sit) {
    if (job->tree) {
      TreeCompleteSlot(job, cit, sit);
      return;
    }
    CollState& coll = cit->second;
    Slot& slot = sit->second;
    const wire::CollDesc& d = coll.desc;
    const uint64_t bytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(d.dtype);
    const wire::ChunkDone done{d.coll_seq, slot.ref};
    if (d.coll == CollType::kAllGather) {
      auto delivery = std::make_shared<AgDelivery>();
      delivery->data = slot.contribs[0];
      delivery->bytes = bytes;
      delivery->done = done;
      delivery->src = slot.ref.segment;
      delivery->result_meta = wire::EncodeResult(done);
      delivery->unsent = job->nranks - 1;
      if (delivery->unsent == 0) {
        SendAck(job, delivery->src, done);
      } else {
        for (uint32_t r = 0; r < job->nranks; ++r) {
          if (r == delivery->src) continue;
          if (coll.joined.count(r) != 0) {
            SendAgChunk(job, r, delivery);
          } else {
            ++delivery->not_joined;
          }
        }
        if (delivery->not_joined > 0) coll.ag_waiting.push_back(std::move(delivery));
      }
    } else {
      const bool pipelined = d.server_elems > slot.ref.count;
      if (workers_ && pipelined && bytes * job->nranks >= kOffloadBytes) {
        SubmitReduction(job, coll, slot);
        return;
      }
      srcs_scratch_.resize(job->nranks);
      for (uint32_t r = 0; r < job->nranks; ++r) srcs_scratch_[r] = slot.contribs[r].get();
      observe::TraceSpan span("reduce", "server");
      const auto t0 = Clock::now();
      Status st = reduce::Combine(d.dtype, d.op, srcs_scratch_.data(), static_cast<int>(job->nranks),
                                  slot.contribs[0].get(), slot.ref.count);
      metrics_.Reduced(Clock::now() - t0);
      if (span.on()) span.args() = ChunkArgs(d, slot.ref, bytes).Add("ranks", job->nranks);
      if (!st.ok()) {
        FailJob(job, Code::kInternal, "reduction failed: " + st.message());
        return;
      }
      SendReduced(job, cit, sit);
      return;
    }
    FinishSlot(job, cit, sit);
  }

  // Hands a complete slot's reduction to a worker; the result lands in contribs[0], in place.
  void SubmitReduction(const std::shared_ptr<Job>& job, const CollState& coll, const Slot& slot) {
    ChunkReduction* task = TakeTask();
    task->tree = false;
    task->dtype = coll.desc.dtype;
    task->op = coll.desc.op;
    task->count = slot.ref.count;
    task->job = job;
    task->coll_seq = coll.desc.coll_seq;
    task->key = SlotKey{slot.ref.segment, slot.ref.offset};
    task->keep.assign(slot.contribs.begin(), slot.contribs.end());
    task->srcs.resize(job->nranks);
    for (uint32_t r = 0; r < job->nranks; ++r) task->srcs[r] = slot.contribs[r].get();
    task->dst = slot.contribs[0].get();
    workers_->Submit(task);
  }

  // A recycled task, or a new one while fewer are in flight than ever before.
  ChunkReduction* TakeTask() {
    if (free_tasks_.empty()) {
      all_tasks_.push_back(std::make_unique<ChunkReduction>());
      return all_tasks_.back().get();
    }
    ChunkReduction* task = free_tasks_.back();
    free_tasks_.pop_back();
    return task;
  }

  // Sends the results of reductions the workers finished. A job that failed meanwhile has
  // forgotten the slot; its buffers are let go here, on the loop thread that owns the pool.
  void CollectReductions() {
    finished_scratch_.clear();
    workers_->TakeFinished(&finished_scratch_);
    for (ReduceTask* t : finished_scratch_) {
      auto* task = static_cast<ChunkReduction*>(t);
      const std::shared_ptr<Job> job = std::move(task->job);
      if (!job->failed) {
        auto cit = job->colls.find(task->coll_seq);
        if (cit != job->colls.end()) {
          auto sit = cit->second.slots.find(task->key);
          if (sit != cit->second.slots.end()) {
            if (task->status.ok()) {
              metrics_.Reduced(task->elapsed);
              job->last_progress = Clock::now();
              if (task->tree) {
                TreePartialDone(job, cit, sit, std::move(task->partial));
              } else {
                SendReduced(job, cit, sit);
              }
            } else {
              FailJob(job, Code::kInternal, "reduction failed: " + task->status.message());
            }
          }
        }
      }
      task->keep.clear();
      task->partial.reset();
      free_tasks_.push_back(task);
    }
  }

  // The reduced chunk is in contribs[0]: results to the ranks that receive it, acks to the rest.
  void SendReduced(const std::shared_ptr<Job>& job, std::map<uint64_t, CollState>::iterator cit,
                   std::map<SlotKey, Slot>::iterator sit) {
    const wire::CollDesc& d = cit->second.desc;
    Slot& slot = sit->second;
    const uint64_t bytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(d.dtype);
    const wire::ChunkDone done{d.coll_seq, slot.ref};
    const std::shared_ptr<uint8_t>& result = job->tree ? slot.tree_buf : slot.contribs[0];
    // In a tree, only the members here (fan-in), not every rank of the job.
    const uint32_t receivers = job->tree ? static_cast<uint32_t>(job->tree->members.seated().size()) : job->nranks;
    for (uint32_t i = 0; i < receivers; ++i) {
      const uint32_t r = job->tree ? job->tree->members.seated()[i] : i;
      job->Answered(r);
      OutMessage m;
      if (d.coll == CollType::kAllReduce || r == slot.ref.segment) {
        wire::EncodeDoneTo(wire::MsgType::kResult, done,
                           transport::StartOutMessage(&m, wire::kDoneMetaBytes, result.get(), bytes));
        m.keepalive = result;
      } else {
        wire::EncodeDoneTo(wire::MsgType::kAck, done, transport::StartOutMessage(&m, wire::kDoneMetaBytes, nullptr, 0));
      }
      SendTo(*job, r, std::move(m));
    }
    FinishSlot(job, cit, sit);
  }

  // A slot's data has gone out: forget it, and the collective once all its slots are done.
  void FinishSlot(const std::shared_ptr<Job>& job, std::map<uint64_t, CollState>::iterator cit,
                  std::map<SlotKey, Slot>::iterator sit) {
    CollState& coll = cit->second;
    metrics_.ChunkDone(Clock::now() - sit->second.first_arrival);
    coll.elems_done += sit->second.ref.count;
    ReleaseState(*job, sit->second.state_bytes);
    RecycleSlot(coll.slots.extract(sit));
    if (coll.elems_done >= coll.desc.server_elems && coll.slots.empty() && coll.ag_waiting.empty()) {
      metrics_.CollectiveDone(coll.desc.coll);
      const uint64_t state_bytes = coll.state_bytes;
      job->colls.erase(cit);  // `coll` is gone
      ReleaseState(*job, state_bytes);
    }
  }

  // Slots are map nodes: finished ones are kept (with their vectors' capacity) for the next
  // chunks, so a steady stream of chunks allocates no slot memory.
  std::map<SlotKey, Slot>::iterator NewSlot(std::map<SlotKey, Slot>* slots, const SlotKey& key) {
    if (free_slots_.empty()) return slots->try_emplace(key).first;
    auto node = std::move(free_slots_.back());
    free_slots_.pop_back();
    node.key() = key;
    return slots->insert(std::move(node)).position;
  }

  void RecycleSlot(std::map<SlotKey, Slot>::node_type node) {
    node.mapped().contribs.clear();  // lets go of the buffers now
    node.mapped().tree_buf.reset();
    if (free_slots_.size() < kMaxFreeSlots) free_slots_.push_back(std::move(node));
  }

  void SendAgChunk(const std::shared_ptr<Job>& job, uint32_t rank, const std::shared_ptr<AgDelivery>& delivery) {
    OutMessage m = transport::MakeOutMessage(delivery->result_meta, delivery->data.get(), delivery->bytes);
    m.keepalive = delivery->data;
    m.on_done = [this, weak = std::weak_ptr<Job>(job), delivery] {
      if (--delivery->unsent == 0) SendAck(weak, delivery->src, delivery->done);
    };
    SendTo(*job, rank, std::move(m));
  }

  // The source of an all-gather chunk learns that every other rank has it.
  void SendAck(const std::weak_ptr<Job>& weak, uint32_t rank, const wire::ChunkDone& done) {
    std::shared_ptr<Job> job = weak.lock();
    if (!job || job->failed) return;
    job->Answered(rank);
    SendTo(*job, rank, transport::MakeOutMessage(wire::EncodeAck(done), nullptr, 0));
  }

  // ---- aggregation tree (docs/tree.md) ----
#include "server/server_tree.inc"

  // ---- limits ----

  Status ChargeState(const std::shared_ptr<Job>& job, uint64_t bytes, const char* what) {
    const MemoryBudget* refused = nullptr;
    if (!job->memory->TryCharge(bytes, &refused)) return FailJobForMemory(job, *refused, bytes, what);
    job->state_bytes += bytes;
    return Status::Ok();
  }

  void ReleaseState(Job& job, uint64_t bytes) {
    job.state_bytes -= bytes;
    job.memory->Release(bytes);
  }

  Status FailJobForMemory(const std::shared_ptr<Job>& job, const MemoryBudget& refused, uint64_t bytes,
                          const char* what) {
    const bool server_wide = &refused == memory_.get();
    return FailJobForLimit(
        job, fmt::format("job {} needs {} more bytes for {} but {} ({}={}) already holds {}; {}", job->hex, bytes, what,
                         server_wide ? "the server" : "the job", refused.name(), Bytes(refused.limit()), refused.used(),
                         server_wide ? "raise --memory-limit, or spread the jobs over more servers"
                                     : "raise --job-memory-limit, or lower OPTCAST_WINDOW / OPTCAST_CHUNK_BYTES"));
  }

  Status FailJobForLimit(const std::shared_ptr<Job>& job, const std::string& why) {
    metrics_.LimitFailure();
    FailJob(job, Code::kResourceExhausted, why);
    return Status(Code::kCancelled, "job failed");
  }

  // Out of file descriptors: stop accepting for a moment rather than spin on the listener.
  void PauseAccepting(const Status& why) {
    if (accept_paused_) return;
    Log().warn("not accepting connections for a moment: {}", why.message());
    if (listener_) (void)poller_.Modify(listener_->fd(), listener_.get(), false, false);
    accept_paused_ = true;
    accept_resume_at_ = Clock::now() + std::chrono::milliseconds(100);
  }

  // Ends a job: every rank gets the error, the job's memory is freed, other jobs are untouched.
  // `job` by value: callers may pass a connection's own `cs->job`, which the loop below resets.
  void FailJob(std::shared_ptr<Job> job, Code code, const std::string& text) {
    if (job->failed) return;
    job->failed = true;
    metrics_.JobFailed(code);
    Log().warn("job {} failed: {}", job->hex, text);
    const uint64_t seq = job->colls.empty() ? 0 : job->colls.begin()->first;
    CloseUpstream(*job, wire::EncodeError(wire::ErrorMsg{code, seq, text}));
    for (auto& [index, p] : job->participants) {
      ConnState* cs = p.conn;
      if (cs == nullptr) continue;
      job->Detach(index, cs, /*departed=*/false);
      SendErrorAndClose(cs, Status(code, text), seq);
      cs->job.reset();
    }
    job->colls.clear();
    ReleaseState(*job, job->state_bytes);
    RememberFailure(job->id, code, text);
    jobs_.erase(job->id);
    metrics_.SetJobs(jobs_.size());
  }

  // A server with nothing in flight for a second returns its cached buffers to the system, so
  // that a burst of large jobs does not leave it holding their memory for good.
  void MaybeGiveBackMemory(Clock::time_point now) {
    if (pool_.cached_bytes() == 0 || now - last_activity_ < std::chrono::seconds(1)) return;
    for (auto& [id, job] : jobs_) {
      if (!job->colls.empty()) return;
    }
    pool_.Trim();
    malloc_trim(0);
  }

  // Failed jobs are remembered for one job timeout, at most kMaxFailedJobs of them.
  void RememberFailure(const wire::JobIdBytes& id, Code code, const std::string& text) {
    static constexpr size_t kMaxFailedJobs = 4096;
    while (failed_jobs_.size() >= kMaxFailedJobs && !failed_order_.empty()) {
      failed_jobs_.erase(failed_order_.front());
      failed_order_.pop_front();
    }
    if (failed_jobs_.emplace(id, FailedJob{code, text, Clock::now() + opts_.job_timeout}).second) {
      failed_order_.push_back(id);
    }
  }

  void ForgetOldFailures(Clock::time_point now) {
    while (!failed_order_.empty()) {
      auto it = failed_jobs_.find(failed_order_.front());
      if (it != failed_jobs_.end() && it->second.forget_at > now) break;
      if (it != failed_jobs_.end()) failed_jobs_.erase(it);
      failed_order_.pop_front();
    }
  }

  void MaybeRetireJob(const std::shared_ptr<Job>& job) {
    if (job->connected != 0 || !job->colls.empty()) return;
    Log().info("job {} finished", job->hex);
    CloseUpstream(*job, wire::EncodeBye());
    jobs_.erase(job->id);
    metrics_.SetJobs(jobs_.size());
  }

  // ---- observability ----

  static observe::TraceArgs ChunkArgs(const wire::CollDesc& d, const wire::ChunkRef& ref, uint64_t bytes) {
    observe::TraceArgs a;
    a.Add("coll", CollTypeName(d.coll)).Add("seq", d.coll_seq).Add("segment", ref.segment).Add("offset", ref.offset);
    a.Add("bytes", bytes);
    return a;
  }

  // Draws the message's time on the wire on its connection's track: from when the connection was
  // free to write it (queued messages go out in order) until its last byte left.
  void TraceSend(ConnState* cs, OutMessage* msg) {
    const double queued = observe::TraceNowUs();
    const bool has_result = msg->payload_len > 0;
    msg->on_done = [cs, queued, has_result, bytes = msg->payload_len, then = std::move(msg->on_done)] {
      const double now = observe::TraceNowUs();
      const double start = std::max(queued, cs->tx_free_us);
      cs->tx_free_us = now;
      observe::TraceArgs a;
      a.Add("bytes", bytes);
      observe::TraceComplete(has_result ? "send" : "send ack", "server", start, now, a, cs->trace_track_tx);
      if (then) then();
    };
  }

  void UpdateLevels() {
    ServerMetrics::Levels l;
    l.jobs = static_cast<int64_t>(jobs_.size());
    l.connections = static_cast<int64_t>(conns_.size());
    for (auto& [cs, owned] : conns_) {
      if (cs->job) ++l.ranks;
      l.send_queue += static_cast<int64_t>(cs->conn->PendingWriteCount());
    }
    for (auto& [id, job] : jobs_) {
      for (auto& [seq, coll] : job->colls) l.chunks_pending += static_cast<int64_t>(coll.slots.size());
    }
    l.buffer_bytes = static_cast<int64_t>(pool_.outstanding_bytes());
    metrics_.SetLevels(l);
  }

  ServerOptions opts_;
  ServerMetrics metrics_;
  std::unique_ptr<transport::Listener> listener_;
  uint16_t port_ = 0;
  transport::Poller poller_;
  transport::Waker waker_;
  std::atomic<bool> stop_{false};
  BufferPool pool_;
  std::unordered_map<ConnState*, std::unique_ptr<ConnState>> conns_;
  std::unordered_map<wire::JobIdBytes, std::shared_ptr<Job>, JobIdHash> jobs_;
  std::vector<ConnState*> dirty_;
  std::shared_ptr<MemoryBudget> memory_;
  struct FailedJob {
    Code code;
    std::string text;
    Clock::time_point forget_at;
  };
  std::unordered_map<wire::JobIdBytes, FailedJob, JobIdHash> failed_jobs_;
  std::deque<wire::JobIdBytes> failed_order_;
  bool accept_paused_ = false;
  Clock::time_point last_activity_{};
  std::atomic<bool> drain_requested_{false};
  std::atomic<int64_t> drain_ms_{0};
  bool draining_ = false;
  bool drain_farewell_sent_ = false;
  Clock::time_point drain_deadline_{}, farewell_until_{};
  Clock::time_point accept_resume_at_{};
  std::unique_ptr<ReduceWorkers> workers_;
  std::vector<std::unique_ptr<ChunkReduction>> all_tasks_;
  std::vector<ChunkReduction*> free_tasks_;
  std::vector<ReduceTask*> finished_scratch_;
  std::vector<const void*> srcs_scratch_;
  std::unique_ptr<bool[]> tree_partial_flags_;
  std::vector<ParentAddress> parent_addrs_;  // --upstream, resolved at Start
  std::vector<uint8_t> tree_scratch_;
  std::vector<std::map<SlotKey, Slot>::node_type> free_slots_;
};

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
