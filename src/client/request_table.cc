// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/request_table.h"

#include <algorithm>

namespace optcast::client {

Request* RequestTable::Find(uint64_t seq) const {
  auto it = active_.find(seq);
  return it == active_.end() ? nullptr : it->second;
}

void RequestTable::Remove(const Request& req) {
  active_.erase(req.seq);
  for (uint64_t rerun : req.rerun_seqs) active_.erase(rerun);
}

std::vector<Request*> RequestTable::Roots() const {
  std::vector<Request*> roots;
  for (const auto& [seq, req] : active_) {
    if (seq == req->seq) roots.push_back(req);
  }
  std::sort(roots.begin(), roots.end(), [](const Request* x, const Request* y) { return x->seq < y->seq; });
  return roots;
}

Request* RequestTable::Oldest() const {
  Request* oldest = active_.begin()->second;
  for (const auto& [seq, r] : active_) {
    if (seq < oldest->seq) oldest = r;
  }
  return oldest;
}

bool RequestTable::AnyWaitingOn(size_t link) const {
  for (const auto& [seq, req] : active_) {
    if (req->pending_link[link] > 0) return true;
  }
  return false;
}

std::vector<Request*> RequestTable::TakeWaitingOn(size_t link) {
  std::vector<Request*> taken;
  for (auto it = active_.begin(); it != active_.end();) {
    Request* req = it->second;
    if (req->pending_link[link] > 0) {
      if (it->first == req->seq) taken.push_back(req);
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

std::vector<Request*> RequestTable::TakeAll() {
  std::vector<Request*> taken;
  for (const auto& [seq, req] : active_) {
    if (seq == req->seq) taken.push_back(req);  // not again for its re-runs
  }
  active_.clear();
  return taken;
}

}  // namespace optcast::client
