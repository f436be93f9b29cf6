// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "common/shard.h"
#include "sim/models.h"

namespace sg4 = simgrid::s4u;

namespace optcast::sim {
namespace {

class RingWorker : public Node {
 public:
  RingWorker(int rank, const SimConfig& c, sg4::Host* host, double* done_s)
      : Node("ring-" + std::to_string(rank), host, c.host_flows),
        rank_(rank),
        n_(c.workers),
        count_(c.bytes / 4),
        done_s_(done_s) {}
  void set_right(Node* right) { right_ = right; }

 protected:
  void Start() override {
    ExpectMessages(2 * static_cast<uint64_t>(n_ - 1));
    SendStep(0);
  }
  // A step ends when the left neighbour's segment is in; the next send follows the previous one
  // on the same connection, as the real ring's back-to-back exchanges do.
  void OnMessage(const Msg&) override {
    ++received_;
    if (received_ < 2 * (n_ - 1)) SendStep(received_);
    if (received_ == 2 * (n_ - 1)) *done_s_ = sg4::Engine::get_clock();
  }
  bool Done() const override { return received_ == 2 * (n_ - 1); }

 private:
  void SendStep(int step) {
    // Reduce-scatter step s sends segment (r - s) mod n; all-gather step s sends (r + 1 - s) mod n.
    const int s = step % (n_ - 1);
    const int seg = ((step < n_ - 1 ? rank_ - s : rank_ + 1 - s) % n_ + n_) % n_;
    Msg m;
    m.kind = Msg::kRingStep;
    m.from = rank_;
    m.bytes = Shard(count_, n_, seg).len * 4;
    Send(right_, m, m.bytes);
  }

  int rank_, n_;
  uint64_t count_;
  double* done_s_;
  Node* right_ = nullptr;
  int received_ = 0;
};

}  // namespace

void SpawnRing(const SimConfig& c, const Fabric& f, Run* run) {
  run->worker_done_s.assign(c.workers, 0.0);
  std::vector<RingWorker*> ws;
  for (int r = 0; r < c.workers; ++r) {
    auto w = std::make_unique<RingWorker>(r, c, f.workers[r], &run->worker_done_s[r]);
    ws.push_back(w.get());
    run->nodes.push_back(std::move(w));
  }
  for (int r = 0; r < c.workers; ++r) ws[r]->set_right(ws[(r + 1) % c.workers]);
}

}  // namespace optcast::sim
