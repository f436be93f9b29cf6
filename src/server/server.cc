// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/server.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "common/log.h"
#include "server/lane.h"
#include "server/reduce_workers.h"
#include "server/server_metrics.h"
#include "server/shared_jobs.h"
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

// Lanes when --io-threads is not given: half the usable cores, so that every event loop leaves a
// core for the reductions and the kernel's TCP work that its ~40 Gbit/s take, and at most 8,
// beyond which one port's traffic does not split usefully; at least 1.
int DefaultLanes(unsigned cores) { return static_cast<int>(std::clamp<unsigned>(cores / 2, 1, 8)); }

// Why a server runs fewer lanes than asked, or "" when it runs them all.
std::string WhyOneLane(const ServerOptions& o) {
  // A tree relays each job through one link to its parent and counts its members in one place.
  if (o.upstream || o.tree_root) return "a server in an aggregation tree runs one lane";
  // A libfabric domain is driven by one thread at a time (FI_THREAD_DOMAIN), and the listener's
  // domain is the one every accepted connection lives in.
  if (o.transport.kind == transport::Kind::kOfi) return "over ofi, a server runs one lane";
  return "";
}

ServerOptions WithDefaults(ServerOptions o) {
  if (o.io_threads <= 0) o.io_threads = DefaultLanes(UsableCores());
  if (o.io_threads > 1 && !WhyOneLane(o).empty()) {
    Log().info("--io-threads={}: {}", o.io_threads, WhyOneLane(o));
    o.io_threads = 1;
  }
  if (o.memory_limit == 0) o.memory_limit = DefaultServerMemoryLimit();
  if (o.job_memory_limit == 0) o.job_memory_limit = o.memory_limit;
  if (o.max_connections == 0) o.max_connections = DefaultMaxConnections();
  return o;
}

}  // namespace

// The server's lanes (lane.h) and what they share: the metrics, the memory budget and the jobs
// open on any lane. Run, Stop, Drain and stats fan out over the lanes.
class Server::Impl {
 public:
  explicit Impl(ServerOptions o)
      : opts_(WithDefaults(std::move(o))), shared_(opts_.memory_limit, opts_.job_memory_limit, metrics_) {
    for (int i = 0; i < opts_.io_threads; ++i) {
      lanes_.push_back(std::make_unique<Lane>(opts_, i, opts_.io_threads, metrics_, shared_,
                                              [this](int lane, std::unique_ptr<ConnState> cs) {
                                                lanes_[static_cast<size_t>(lane)]->HandOver(std::move(cs));
                                              }));
    }
  }
  // Every lane's workers stop before any lane's connections go: a job's buffers may be in any.
  ~Impl() {
    for (auto it = lanes_.rbegin(); it != lanes_.rend(); ++it) it->reset();
  }

  Status Start();
  Status Run();
  uint16_t port() const { return lanes_[0]->port(); }
  void Stop() {
    for (auto& lane : lanes_) lane->Stop();
  }
  void Drain(std::chrono::milliseconds deadline) {
    for (auto& lane : lanes_) lane->Drain(deadline);
  }
  const observe::Registry& metrics() const { return metrics_.registry(); }
  ServerStats stats() const;

 private:
  const ServerOptions opts_;
  ServerMetrics metrics_;  // the totals; each lane counts through its own view
  SharedJobs shared_;
  std::vector<std::unique_ptr<Lane>> lanes_;
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
  // --reduce-threads is the server's; each lane gets its share, the first ones the remainder.
  const int lanes = static_cast<int>(lanes_.size());
  const int threads = opts_.reduce_threads >= 0
                          ? opts_.reduce_threads
                          : std::max(ReduceWorkers::ThreadsForCores(UsableCores()) - (lanes - 1), lanes);
  for (int i = 0; i < lanes; ++i) {
    OPTCAST_RETURN_IF_ERROR(lanes_[i]->Start(threads / lanes + (i < threads % lanes ? 1 : 0)));
  }
  Log().info("listening on {}:{} over {} ({} lane{}, {} reduction thread{})", opts_.listen.host, port(),
             lanes_[0]->TransportName(), lanes, lanes == 1 ? "" : "s", threads, threads == 1 ? "" : "s");
  if (opts_.secret.empty()) {
    Log().warn("no secret configured: hellos are not authenticated{}",
               transport::IsLoopbackHost(opts_.listen.host) ? " (listening on loopback only)"
                                                            : "; INSECURE: any host that reaches this port can "
                                                              "join or disturb jobs");
  }
  return Status::Ok();
}

Status Server::Impl::Run() {
  // Lanes 1.. on threads of their own, lane 0 on the caller's; the server ends when they all did.
  std::vector<Status> results(lanes_.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < lanes_.size(); ++i) {
    threads.emplace_back([this, i, &results] {
      results[i] = lanes_[i]->Run();
      if (!results[i].ok()) Stop();
    });
  }
  results[0] = lanes_[0]->Run();
  // Lane 0 ended by Stop, a drain or an error: a drain ends each lane by itself, the others stop.
  if (!results[0].ok()) Stop();
  for (auto& t : threads) t.join();
  for (const Status& st : results) {
    if (!st.ok()) return st;
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
  s.memory_used = shared_.memory()->used();
  s.connections_refused = metrics_.connections_refused();
  s.limit_failures = metrics_.limit_failures();
  s.draining = metrics_.draining();
  s.auth_failures = metrics_.auth_failures();
  s.reduce_threads = metrics_.reduce_threads();
  s.lanes = lanes_.size();
  return s;
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
