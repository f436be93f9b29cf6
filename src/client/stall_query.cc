// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/stall_query.h"

#include <fmt/format.h>

namespace optcast::client {

void StallQuery::Begin(uint64_t coll_seq, std::vector<Server> servers, Clock::time_point deadline) {
  asked_ = true;
  coll_seq_ = coll_seq;
  deadline_ = deadline;
  servers_.clear();
  for (auto& s : servers) {
    if (s.coll_seq == 0) s.coll_seq = coll_seq;
    servers_.push_back({std::move(s), std::nullopt});
  }
}

void StallQuery::OnReport(size_t link, uint64_t coll_seq, std::string waiting_for) {
  if (!asked_) return;
  for (auto& a : servers_) {
    if (a.server.link == link && a.server.coll_seq == coll_seq && !a.answer) a.answer = std::move(waiting_for);
  }
}

bool StallQuery::Done(Clock::time_point now) const {
  if (now >= deadline_) return true;
  for (const auto& a : servers_) {
    if (!a.answer) return false;
  }
  return true;
}

std::string StallQuery::Describe(std::chrono::milliseconds waited) const {
  std::string out;
  bool named_ranks = false;
  int silent_servers = 0;
  for (const auto& a : servers_) {
    if (!out.empty()) out += "; ";
    if (a.answer) {
      // A server answers with ranks ("1,3") or with a parenthesised sentence.
      const bool sentence = !a.answer->empty() && a.answer->front() == '(';
      named_ranks = named_ranks || !sentence;
      out += fmt::format("server {} is still waiting for rank(s) {}", a.server.address, *a.answer);
    } else {
      ++silent_servers;
      out +=
          fmt::format("server {} did not say which ranks it waits for within {} ms", a.server.address, waited.count());
    }
  }
  if (servers_.empty()) return "a rank or a server may be stuck or dead";
  if (silent_servers > 0 && named_ranks) return out + "; a rank or a server may be stuck or dead";
  if (silent_servers == 1) return out + "; that server may be stuck or dead";
  if (silent_servers > 1) return out + "; those servers may be stuck or dead";
  if (named_ranks) return out + "; a rank may be stuck or dead";
  return out + "; a rank or a server may be stuck or dead";
}

}  // namespace optcast::client
