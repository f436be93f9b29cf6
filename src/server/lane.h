// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "optcast/status.h"
#include "server/admission.h"
#include "server/buffer_pool.h"
#include "server/collectives.h"
#include "server/connection_loop.h"
#include "server/failover.h"
#include "server/job_table.h"
#include "server/options.h"
#include "server/reduction_dispatcher.h"
#include "server/server_metrics.h"
#include "server/shared_jobs.h"
#include "server/tree_relay.h"

namespace optcast::server {

// One event loop of a server and the parts it drives: its connections, jobs, buffers, reduce
// workers, tree relay, admission and failover. A server of k lanes serves like k servers behind
// one port (a rank joins each lane on a connection of its own, wire::Hello::lane); lanes share
// nothing on the hot path but the memory budget and the metrics (SharedJobs, ServerMetrics).
// Lane 0 listens: it reads each new connection's hello and hands one that names another lane to
// that lane (HandOver), whose admission answers it, challenge and proof included.
//
// The connection loop reads messages, which go to admission, the collectives or the tree; every
// 100 ms a sweep enforces the timeouts; a drain ends the loop gracefully. Run() on one thread,
// Stop(), Drain() and HandOver() from any.
class Lane : public ConnectionLoop::Events {
 public:
  // Gives a connection to lane `lane` of the same server.
  using HandOff = std::function<void(int lane, std::unique_ptr<ConnState> cs)>;

  Lane(const ServerOptions& opts, int index, int lanes, ServerMetrics& totals, SharedJobs& shared, HandOff hand_off);
  // The workers go first, while the tasks and buffers they use still exist; then the connections,
  // while the jobs and parts their pending messages' callbacks reach still exist.
  ~Lane() override;

  // Lane 0 binds the listening socket; every lane creates its reduce workers' descriptors.
  Status Start(int reduce_threads);
  Status Run();
  uint16_t port() const { return loop_.port(); }
  std::string TransportName() const { return loop_.TransportName(); }

  void Stop() {
    stop_.store(true);
    loop_.Wake();
  }
  void Drain(std::chrono::milliseconds deadline) {
    drain_ms_.store(std::max<int64_t>(deadline.count(), 0));
    drain_requested_.store(true);
    loop_.Wake();
  }
  // Takes over a connection another lane accepted, with its hello to answer. Thread-safe.
  void HandOver(std::unique_ptr<ConnState> cs);

  // ---- ConnectionLoop::Events ----
  Status OnMessageMeta(transport::Connection& c, std::span<const uint8_t> meta, uint64_t payload_len,
                       uint8_t** payload_dst) override;
  Status OnMessageComplete(transport::Connection& c) override;
  void OnConnectionLost(ConnState* cs, const Status& why) override;
  void OnWatched(void* /*tag*/) override { dispatcher_.CollectFinished(); }
  void OnHandOff(std::unique_ptr<ConnState> cs) override {
    const int lane = cs->hand_off_lane;
    hand_off_(lane, std::move(cs));
  }

 private:
  // A hello: this lane's, or one to hand to the lane it names.
  Status OnHello(ConnState* cs, const wire::Hello& h);
  // Adopts the connections other lanes handed over and answers their hellos.
  void TakeHandedOver();
  void Sweep();
  // A lane with nothing in flight for a second returns its cached buffers to the system, so
  // that a burst of large jobs does not leave it holding their memory for good.
  void MaybeGiveBackMemory(Clock::time_point now);
  void UpdateLevels();
  // Graceful shutdown: no new connections or collectives, then, once the collectives in flight
  // are done or the deadline passed, an error to whatever is left.
  void BeginDrain();
  // One drain step per loop iteration; true once the lane may exit.
  bool DrainStep();

  const ServerOptions& opts_;
  const int index_;
  const int lanes_;
  HandOff hand_off_;
  ServerMetrics metrics_;  // this lane's view of the server's
  BufferPool pool_;
  ConnectionLoop loop_;
  JobTable jobs_;
  ReductionDispatcher dispatcher_;
  Collectives collectives_;
  TreeRelay tree_;
  Admission admission_;
  FailoverCoordinator failover_;
  std::mutex handed_mu_;
  std::vector<std::unique_ptr<ConnState>> handed_;  // guarded by handed_mu_
  std::atomic<bool> stop_{false};
  std::atomic<bool> drain_requested_{false};
  std::atomic<int64_t> drain_ms_{0};
  bool drain_farewell_sent_ = false;
  Clock::time_point drain_deadline_{}, farewell_until_{};
};

}  // namespace optcast::server
