// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "sim/fabric.h"

#include <map>
#include <string>

namespace sg4 = simgrid::s4u;

namespace optcast::sim {
namespace {

using Dir = sg4::LinkInRoute::Direction;

class Builder {
 public:
  Builder(const SimConfig& c) : c_(c), root_(sg4::create_star_zone("spine")) {}

  // A rack of hosts named prefix0.. with the given speeds; returns them in order.
  // `share` scales every link of the rack (host ports and uplink): a folded rack of shared servers
  // carries only the simulated racks' share of their traffic (sim_config.h, simulated_racks).
  std::vector<sg4::Host*> AddRack(const std::string& prefix, int hosts, double speed, const std::string& prefix2 = "",
                                  int hosts2 = 0, double speed2 = 0, double share = 1.0) {
    const std::string name = "rack" + std::to_string(racks_++);
    auto* zone = sg4::create_star_zone(name);
    zone->set_parent(root_);
    auto* gw = zone->create_router(name + "-leaf");
    // Half the host-to-host latency on each host link, so two hosts of one rack are latency_s apart.
    std::vector<sg4::Host*> out;
    auto add = [&](const std::string& hname, double sp) {
      sg4::Host* h = zone->create_host(hname, sp);
      auto* link =
          zone->create_split_duplex_link(hname + "-port", c_.link_bps * share)->set_latency(c_.latency_s / 2)->seal();
      zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, {sg4::LinkInRoute(link, Dir::UP)}, true);
      out.push_back(h);
    };
    for (int i = 0; i < hosts; ++i) add(prefix + std::to_string(next_index(prefix)), speed);
    for (int i = 0; i < hosts2; ++i) add(prefix2 + std::to_string(next_index(prefix2)), speed2);
    zone->add_route(gw, nullptr, nullptr, nullptr, {}, true);
    zone->seal();
    auto* up = root_->create_split_duplex_link(name + "-uplink", uplink_bps() * share)->set_latency(0)->seal();
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
  for (int first = 0; first < workers; first += workers_per_rack) {
    const int here = std::min(workers_per_rack, workers - first);
    auto hosts = b.AddRack("w", here, worker_speed, "leaf", leaf_per_rack, c.reduce_bps);
    for (int i = 0; i < here; ++i) {
      f.workers.push_back(hosts[i]);
      f.worker_rack.push_back(f.worker_racks);
    }
    if (leaf_per_rack > 0) f.leaf_servers.emplace_back(hosts.begin() + here, hosts.end());
    ++f.worker_racks;
  }
  const int nserv = c.algo == Algo::kServers ? c.servers : c.algo == Algo::kTree ? c.roots : 0;
  for (int first = 0; first < nserv; first += c.rack_size) {
    // Folded: these servers serve every worker rack, of which only the simulated share is here.
    const double share = c.FoldShare();
    auto hosts = b.AddRack("s", std::min(c.rack_size, nserv - first), c.reduce_bps * share, "", 0, 0, share);
    f.servers.insert(f.servers.end(), hosts.begin(), hosts.end());
  }
  f.timer = b.AddTimer();
  b.Seal();
  engine.seal_platform();
  return f;
}

}  // namespace optcast::sim
