// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include <algorithm>
#include <unordered_map>

#include "client/plan.h"
#include "client/send_window.h"
#include "common/shard.h"
#include "sim/models.h"
#include "wire/protocol.h"

namespace sg4 = simgrid::s4u;

namespace optcast::sim {
namespace {

// How one AllReduce is cut, by the client's own rules (client/plan.h).
struct Cut {
  uint64_t count = 0;
  int stripes = 0;
  uint64_t chunk_elems = 0;

  // `rate_bits`: the port rate flat servers announce (the link's); 0 for a tree, whose ranks
  // apply no rate rule (client/server_communicator.cc).
  Cut(const SimConfig& c, int servers, const client::ChunkPolicy& policy, uint64_t rate_bits) : count(c.bytes / 4) {
    stripes = client::ServersToUse(DataType::kFloat32, count, servers, c.workers, rate_bits);
    chunk_elems = client::ChooseChunkElems(DataType::kFloat32, count, stripes, c.chunk_bytes, UINT64_MAX,
                                           client::ForLinkRate(policy, c.workers, rate_bits));
  }
  uint64_t StripeElems(int j) const { return Shard(count, stripes, j).len; }
  int Chunks(int j) const { return static_cast<int>((StripeElems(j) + chunk_elems - 1) / chunk_elems); }
  uint64_t ChunkBytes(int j, int k) const {
    return std::min(chunk_elems, StripeElems(j) - static_cast<uint64_t>(k) * chunk_elems) * 4;
  }
};

uint64_t WireBytes(uint64_t payload) { return payload + wire::kChunkMetaBytes; }

class Worker : public Node {
 public:
  Worker(int rank, const SimConfig& c, const Cut& cut, sg4::Host* host, double* done_s)
      : Node("w" + std::to_string(rank), host, c.host_flows),
        rank_(rank),
        first_stripe_(FirstStripe(rank, c, cut)),
        c_(c),
        cut_(cut),
        done_s_(done_s),
        to_(cut.stripes),
        next_(cut.stripes, 0),
        inflight_(cut.stripes, 0),
        inflight_bytes_(cut.stripes, 0) {}
  void set_destination(int stripe, Node* n) { to_[stripe] = n; }

 protected:
  void Start() override {
    for (int j = 0; j < cut_.stripes; ++j) results_left_ += cut_.Chunks(j);
    ExpectMessages(results_left_);
    FillWindows();
  }
  void OnMessage(const Msg& m) override {
    --inflight_[m.stripe];
    inflight_bytes_[m.stripe] -= m.bytes;
    if (--results_left_ == 0) *done_s_ = sg4::Engine::get_clock();
    FillWindows();
  }
  bool Done() const override { return results_left_ == 0; }

 private:
  // A window of chunks per server: a fixed count if one is set, else at least kMinWindowChunks and
  // at most kMaxWindowChunks chunks or kWindowBytes bytes (client/send_window.h), open from the
  // start. The client opens its window from two chunks up to a steady value that the jitter of
  // real hosts calls for; the model has no jitter, and is calibrated with this fixed window.
  bool Room(int j, uint64_t bytes) const {
    if (c_.window > 0) return inflight_[j] < c_.window;
    if (inflight_[j] < client::kMinWindowChunks) return true;
    return inflight_[j] < client::kMaxWindowChunks && inflight_bytes_[j] + bytes <= client::kWindowBytes;
  }
  // Round robin over the stripes, so every server gets chunk k before any gets chunk k+1. Each
  // rank starts at its own stripe: the outbox has only host_flows messages on the wire, and if
  // every rank began with server 0 they would all crowd the same few servers at once, which real
  // TCP, sending on every connection at once, does not.
  void FillWindows() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int i = 0; i < cut_.stripes; ++i) {
        const int j = (first_stripe_ + i) % cut_.stripes;
        if (next_[j] == cut_.Chunks(j)) continue;
        const uint64_t bytes = cut_.ChunkBytes(j, next_[j]);
        if (!Room(j, bytes)) continue;
        Send(to_[j], Msg{Msg::kContrib, j, next_[j], rank_, bytes}, WireBytes(bytes));
        ++next_[j];
        ++inflight_[j];
        inflight_bytes_[j] += bytes;
        progress = true;
      }
    }
  }

  // Where a rank starts its round robin: its own stripe, so that n ranks cover the stripes evenly.
  // Folded with fewer simulated ranks than stripes, the ranks spread their starts over all stripes
  // as the whole job's ranks would, or the servers past the last rank would start idle.
  static int FirstStripe(int rank, const SimConfig& c, const Cut& cut) {
    const int ranks = c.SimulatedWorkers();
    if (c.Folded() && ranks < cut.stripes) return static_cast<int>(static_cast<int64_t>(rank) * cut.stripes / ranks);
    return rank % cut.stripes;
  }

  int rank_;
  int first_stripe_;
  const SimConfig& c_;
  const Cut& cut_;
  double* done_s_;
  std::vector<Node*> to_;
  std::vector<int> next_, inflight_;
  std::vector<uint64_t> inflight_bytes_;
  uint64_t results_left_ = 0;
};

// A flat server, a tree leaf or a tree root. It reduces a chunk once `fan_in` contributions are
// in; then a root (no parent) sends the result down to `children`, a leaf sends its partial up
// and relays the parent's result down when it comes.
class Server : public Node {
 public:
  Server(std::string name, const SimConfig& c, const Cut& cut, sg4::Host* host, int fan_in)
      : Node(std::move(name), host, c.host_flows), c_(c), cut_(cut), fan_in_(fan_in) {}
  void Handle(int stripe, Node* parent) {
    parents_[stripe] = parent;
    const uint64_t chunks = cut_.Chunks(stripe);
    ExpectMessages(chunks * static_cast<uint64_t>(fan_in_) + (parent ? chunks : 0));
  }
  void AddChild(Node* n) { children_.push_back(n); }

 protected:
  void OnMessage(const Msg& m) override {
    if (m.kind == Msg::kResult) {  // from the parent: relay down
      SendDown(m);
      return;
    }
    const uint64_t key = Key(m.stripe, m.chunk);
    if (++arrived_[key] < fan_in_) return;
    arrived_.erase(key);
    // Reading every contribution once, plus a fixed cost per contribution received.
    const double flops = static_cast<double>(m.bytes) * fan_in_ + c_.per_chunk_s * c_.reduce_bps * fan_in_;
    Reduce(flops, key);
  }
  void OnReduced(uint64_t key) override {
    const int stripe = static_cast<int>(key >> 32), chunk = static_cast<int>(key & 0xffffffffu);
    const Msg done{Msg::kResult, stripe, chunk, -1, cut_.ChunkBytes(stripe, chunk)};
    if (c_.server_delay_s > 0) {
      Delay(c_.server_delay_s, done);
    } else {
      OnDelayed(done);
    }
  }
  void OnDelayed(const Msg& m) override {
    if (Node* parent = parents_[m.stripe]) {
      Send(parent, Msg{Msg::kContrib, m.stripe, m.chunk, -1, m.bytes}, WireBytes(m.bytes), c_.partials_first);
    } else {
      SendDown(m);
    }
  }
  bool Done() const override { return arrived_.empty(); }

 private:
  static uint64_t Key(int stripe, int chunk) {
    return (static_cast<uint64_t>(stripe) << 32) | static_cast<uint32_t>(chunk);
  }
  void SendDown(const Msg& m) {
    const std::vector<Node*>& to = per_stripe_children_.empty() ? children_ : per_stripe_children_[m.stripe];
    // Staggered by stripe and chunk for the same reason as the workers' order.
    const size_t first = static_cast<size_t>(m.stripe + m.chunk) % to.size();
    for (size_t i = 0; i < to.size(); ++i) {
      Send(to[(first + i) % to.size()], Msg{Msg::kResult, m.stripe, m.chunk, -1, m.bytes}, WireBytes(m.bytes));
    }
  }

 public:
  // Roots of a tree send each stripe's result only to the leaves that handle that stripe.
  std::vector<std::vector<Node*>> per_stripe_children_;

 private:
  const SimConfig& c_;
  const Cut& cut_;
  int fan_in_;
  std::vector<Node*> children_;
  std::unordered_map<int, Node*> parents_;
  std::unordered_map<uint64_t, int> arrived_;
};

}  // namespace

namespace {
// The cut lives as long as the run's nodes, which keep references to it.
const Cut& KeepCut(const SimConfig& c, int servers, const client::ChunkPolicy& policy, uint64_t rate_bits, Run* run) {
  auto cut = std::make_shared<Cut>(c, servers, policy, rate_bits);
  run->keep = cut;
  return *cut;
}
}  // namespace

void SpawnServers(const SimConfig& c, const Fabric& f, Run* run) {
  const Cut& cut = KeepCut(c, c.servers, client::kStreamChunks, static_cast<uint64_t>(c.link_bps * 8), run);
  run->chunk_bytes = cut.chunk_elems * 4;
  run->stripes = cut.stripes;
  const int workers = c.SimulatedWorkers();
  run->worker_done_s.assign(workers, 0.0);
  std::vector<Server*> servers;
  for (int j = 0; j < cut.stripes; ++j) {
    // Folded, a server hears from the simulated workers only; its reduce rate is scaled to match.
    auto s = std::make_unique<Server>("s" + std::to_string(j), c, cut, f.servers[j], workers);
    s->Handle(j, nullptr);
    servers.push_back(s.get());
    run->nodes.push_back(std::move(s));
  }
  for (int r = 0; r < workers; ++r) {
    auto w = std::make_unique<Worker>(r, c, cut, f.workers[r], &run->worker_done_s[r]);
    for (int j = 0; j < cut.stripes; ++j) {
      w->set_destination(j, servers[j]);
      servers[j]->AddChild(w.get());
    }
    run->nodes.push_back(std::move(w));
  }
}

void SpawnTree(const SimConfig& c, const Fabric& f, Run* run) {
  // Stripes: one per leaf server of a rack, or per root if there are more roots.
  const int leaves = c.servers, roots = c.roots;
  // Cut as the client cuts a tree job's stripes (its servers' welcomes say they are a tree).
  const Cut& cut = KeepCut(c, std::max(leaves, roots), client::kTreeStreamChunks, 0, run);
  run->chunk_bytes = cut.chunk_elems * 4;
  run->stripes = cut.stripes;
  const int workers = c.SimulatedWorkers();
  run->worker_done_s.assign(workers, 0.0);
  std::vector<Server*> root_nodes;
  for (int q = 0; q < roots; ++q) {
    auto s = std::make_unique<Server>("root" + std::to_string(q), c, cut, f.servers[q], f.worker_racks);
    s->per_stripe_children_.resize(cut.stripes);
    root_nodes.push_back(s.get());
    run->nodes.push_back(std::move(s));
  }
  std::vector<int> rack_workers(f.worker_racks, 0);
  for (int r = 0; r < workers; ++r) ++rack_workers[f.worker_rack[r]];
  std::vector<std::vector<Server*>> leaf_nodes(f.worker_racks);
  for (int k = 0; k < f.worker_racks; ++k) {
    for (int l = 0; l < leaves; ++l) {
      auto s = std::make_unique<Server>("leaf" + std::to_string(k) + "-" + std::to_string(l), c, cut,
                                        f.leaf_servers[k][l], rack_workers[k]);
      leaf_nodes[k].push_back(s.get());
      run->nodes.push_back(std::move(s));
    }
  }
  for (int j = 0; j < cut.stripes; ++j) {
    Server* root = root_nodes[j % roots];
    root->Handle(j, nullptr);
    for (int k = 0; k < f.worker_racks; ++k) {
      Server* leaf = leaf_nodes[k][j % leaves];
      leaf->Handle(j, root);
      root->per_stripe_children_[j].push_back(leaf);
    }
  }
  for (int r = 0; r < workers; ++r) {
    auto w = std::make_unique<Worker>(r, c, cut, f.workers[r], &run->worker_done_s[r]);
    const int k = f.worker_rack[r];
    for (int l = 0; l < leaves; ++l) leaf_nodes[k][l]->AddChild(w.get());
    for (int j = 0; j < cut.stripes; ++j) w->set_destination(j, leaf_nodes[k][j % leaves]);
    run->nodes.push_back(std::move(w));
  }
}

}  // namespace optcast::sim
