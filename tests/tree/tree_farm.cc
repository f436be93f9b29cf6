// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tree_farm.h"

#include <fmt/format.h>

#include <algorithm>

namespace optcast::tree {

TreeFarm::~TreeFarm() { StopAll(); }

Status TreeFarm::Start(const std::vector<int>& parent, const server::ServerOptions& base) {
  const size_t n = parent.size();
  servers_.resize(n);
  threads_.resize(n);
  std::vector<bool> started(n, false);
  for (size_t done = 0; done < n;) {
    const size_t before = done;
    for (size_t i = 0; i < n; ++i) {
      if (started[i] || (parent[i] >= 0 && !started[parent[i]])) continue;
      server::ServerOptions o = base;
      if (parent[i] >= 0) o.upstream = transport::Endpoint{"127.0.0.1", servers_[parent[i]]->port()};
      // As `optcast server --topology` starts a root with children.
      o.tree_root = o.tree_root ||
                    (mark_roots && parent[i] < 0 && std::count(parent.begin(), parent.end(), static_cast<int>(i)) > 0);
      servers_[i] = std::make_unique<server::Server>(o);
      OPTCAST_RETURN_IF_ERROR(servers_[i]->Start());
      threads_[i] = std::thread([s = servers_[i].get()] { (void)s->Run(); });
      started[i] = true;
      ++done;
    }
    if (done == before) return InvalidArgument("the tree's parent links form a cycle");
  }
  return Status::Ok();
}

std::string TreeFarm::address(int node) const { return fmt::format("127.0.0.1:{}", servers_[node]->port()); }

void TreeFarm::Kill(int node) {
  if (!servers_[node]) return;
  servers_[node]->Stop();
  if (threads_[node].joinable()) threads_[node].join();
  servers_[node].reset();
}

void TreeFarm::StopAll() {
  for (size_t i = 0; i < servers_.size(); ++i) Kill(static_cast<int>(i));
}

}  // namespace optcast::tree
