// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "sim/fabric.h"

#include <algorithm>
#include <map>
#include <string>

namespace sg4 = simgrid::s4u;

namespace optcast::sim {
namespace {

using Dir = sg4::LinkInRoute::Direction;

class Builder {
 public:
  Builder(const SimConfig& c) : c_(c), root_(sg4::create_star_zone("spine")) {}

  // Hosts of one kind in a rack: prefix0.., each of `speed` flops.
  struct Group {
    std::string prefix;
    int hosts = 0;
    double speed = 0;
  };

  // A rack of hosts, the groups in order; returns them in order.
  // `share` scales every link of the rack (host ports and uplink): a folded rack of shared servers
  // carries only the simulated racks' share of their traffic (sim_config.h, simulated_racks).
  // `uplink` overrides the uplink's rate (before `share`); 0: rack_size * link / oversub.
  std::vector<sg4::Host*> AddRack(const std::vector<Group>& groups, double share = 1.0, double uplink = 0) {
    const std::string name = "rack" + std::to_string(racks_++);
    auto* zone = sg4::create_star_zone(name);
    zone->set_parent(root_);
    auto* gw = zone->create_router(name + "-leaf");
    // Half the host-to-host latency on each host link, so two hosts of one rack are latency_s apart.
    std::vector<sg4::Host*> out;
    for (const Group& g : groups) {
      for (int i = 0; i < g.hosts; ++i) {
        const std::string hname = g.prefix + std::to_string(next_index(g.prefix));
        sg4::Host* h = zone->create_host(hname, g.speed);
        auto* link =
            zone->create_split_duplex_link(hname + "-port", c_.link_bps * share)->set_latency(c_.latency_s / 2)->seal();
        zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, {sg4::LinkInRoute(link, Dir::UP)}, true);
        out.push_back(h);
      }
    }
    zone->add_route(gw, nullptr, nullptr, nullptr, {}, true);
    zone->seal();
    const double up_bps = (uplink > 0 ? uplink : uplink_bps()) * share;
    auto* up = root_->create_split_duplex_link(name + "-uplink", up_bps)->set_latency(0)->seal();
    root_->add_route(zone->get_netpoint(), nullptr, gw, nullptr, {sg4::LinkInRoute(up, Dir::UP)}, true);
    return out;
  }

  sg4::Host* AddTimer() {
    // Speed 1 and more cores than there are concurrent delays: an execution of x flops lasts x s.
    return root_->create_host("timer", 1.0)->set_core_count(1 << 24)->seal();
  }
  double uplink_bps() const { return c_.rack_size * c_.link_bps / c_.oversub; }
  void Seal() { root_->seal(); }

 private:
  int next_index(const std::string& prefix) { return counters_[prefix]++; }

  const SimConfig& c_;
  sg4::NetZone* root_;
  int racks_ = 0;
  std::map<std::string, int> counters_;
};

}  // namespace

Fabric BuildFabric(sg4::Engine& engine, const SimConfig& c) {
  Fabric f;
  Builder b(c);
  f.uplink_bps = b.uplink_bps();
  const double worker_speed = 1e9;  // workers compute nothing in these models
  // Tree leaf servers take extra ports on their rack's leaf switch; the uplink stays sized by the
  // rack_size worker ports, so every algorithm sees the same racks of workers.
  const int leaf_per_rack = c.algo == Algo::kTree ? c.servers : 0;
  const int workers_per_rack = c.rack_size;
  const int workers = c.SimulatedWorkers();
  const bool tree = c.algo == Algo::kTree;
  // Spread roots take ports in the worker racks when every rack is simulated. Folded, a root
  // serves racks that are not simulated, so it keeps the simulated share of a port in a rack of
  // its own (one root per rack, as spread gives): its rack's uplink then carries the root's
  // traffic but not that rack's own leaves', which leaves it far from full (docs/scale.md).
  const bool roots_in_worker_racks = tree && c.root_placement == RootPlacement::kSpread && !c.Folded();
  const int all_racks = c.WorkerRacks();
  std::vector<int> root_rack;  // roots_in_worker_racks: the worker rack of each root
  if (roots_in_worker_racks) {
    for (int q = 0; q < c.roots; ++q) root_rack.push_back(q % all_racks);
  }
  std::vector<std::vector<sg4::Host*>> roots_by_rack(all_racks);
  for (int first = 0; first < workers; first += workers_per_rack) {
    const int here = std::min(workers_per_rack, workers - first);
    const int k = f.worker_racks;
    const int roots_here = static_cast<int>(std::count(root_rack.begin(), root_rack.end(), k));
    auto hosts = b.AddRack(
        {{"w", here, worker_speed}, {"leaf", leaf_per_rack, c.reduce_bps}, {"root", roots_here, c.reduce_bps}});
    for (int i = 0; i < here; ++i) {
      f.workers.push_back(hosts[i]);
      f.worker_rack.push_back(k);
    }
    if (leaf_per_rack > 0) f.leaf_servers.emplace_back(hosts.begin() + here, hosts.begin() + here + leaf_per_rack);
    roots_by_rack[k].assign(hosts.begin() + here + leaf_per_rack, hosts.end());
    ++f.worker_racks;
  }
  // Folded: these servers serve every worker rack, of which only the simulated share is here.
  const double share = c.FoldShare();
  if (roots_in_worker_racks) {
    std::vector<size_t> taken(all_racks, 0);
    for (int q = 0; q < c.roots; ++q) f.servers.push_back(roots_by_rack[root_rack[q]][taken[root_rack[q]]++]);
  } else if (tree && c.root_placement != RootPlacement::kRack) {
    // One root per rack of its own: spread (folded) behind a rack uplink, spine behind none (an
    // uplink as fast as its port).
    const double uplink = c.root_placement == RootPlacement::kSpine ? c.link_bps : 0;
    for (int q = 0; q < c.roots; ++q) {
      auto hosts = b.AddRack({{"root", 1, c.reduce_bps * share}}, share, uplink);
      f.servers.push_back(hosts[0]);
    }
  } else {
    const int nserv = c.algo == Algo::kServers ? c.servers : tree ? c.roots : 0;
    for (int first = 0; first < nserv; first += c.rack_size) {
      auto hosts = b.AddRack({{"s", std::min(c.rack_size, nserv - first), c.reduce_bps * share}}, share);
      f.servers.insert(f.servers.end(), hosts.begin(), hosts.end());
    }
  }
  f.timer = b.AddTimer();
  b.Seal();
  engine.seal_platform();
  return f;
}

}  // namespace optcast::sim
