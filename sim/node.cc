// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "sim/node.h"

#include <stdexcept>

namespace sg4 = simgrid::s4u;

namespace optcast::sim {

namespace {
// Receives kept posted: enough that arrivals are noticed when they complete, few enough that
// waiting on them stays cheap.
constexpr size_t kPostedReceives = 16;
constexpr int kPerDestination = 1;
}  // namespace

Node::Node(std::string name, sg4::Host* host, int host_flows)
    : name_(std::move(name)), host_(host), mbox_(sg4::Mailbox::by_name(name_)), host_flows_(host_flows) {}

void Node::Send(Node* to, const Msg& m, uint64_t wire_bytes, bool first) {
  if (first) {
    outbox_.push_front(Outgoing{to, new Msg(m), wire_bytes});
  } else {
    outbox_.push_back(Outgoing{to, new Msg(m), wire_bytes});
  }
}

void Node::Reduce(double flops, uint64_t tag) { reduce_queue_.emplace_back(flops, tag); }

void Node::Delay(double seconds, const Msg& m) {
  if (timer_ == nullptr) throw std::runtime_error(name_ + ": a delay needs a timer host (model bug)");
  sg4::ExecPtr e = sg4::Exec::init()->set_host(timer_)->set_flops_amount(seconds);
  e->start();
  delays_.emplace_back(std::move(e), m);
}

void Node::StartSends() {
  // Oldest first; a message waits while its destination's connection is busy.
  for (auto it = outbox_.begin(); it != outbox_.end() && flights_.size() < static_cast<size_t>(host_flows_);) {
    int& busy = busy_[it->to];
    if (busy >= kPerDestination) {
      ++it;
      continue;
    }
    flights_.push_back(Flight{it->to->mailbox()->put_async(it->msg, it->wire_bytes), it->to});
    ++busy;
    ++messages_;
    it = outbox_.erase(it);
  }
}

void Node::Run() {
  Start();
  std::vector<sg4::ActivityPtr> acts;
  while (true) {
    StartSends();
    while (posted_ < expected_ && receives_.size() < kPostedReceives) {
      auto r = std::make_unique<Receive>();
      r->comm = mbox_->get_async<Msg>(&r->data);
      receives_.push_back(std::move(r));
      ++posted_;
    }
    if (!exec_ && !reduce_queue_.empty()) {
      exec_ = sg4::this_actor::exec_async(reduce_queue_.front().first);
      exec_tag_ = reduce_queue_.front().second;
      reduce_queue_.pop_front();
    }
    if (flights_.empty() && receives_.empty() && !exec_ && delays_.empty()) {
      if (!outbox_.empty() || !Done())
        throw std::runtime_error(name_ + ": nothing in flight but the algorithm is not finished (model bug)");
      return;
    }
    acts.clear();
    for (auto& f : flights_) acts.push_back(f.comm);
    for (auto& r : receives_) acts.push_back(r->comm);
    for (auto& d : delays_) acts.push_back(d.first);
    if (exec_) acts.push_back(exec_);
    const size_t i = static_cast<size_t>(sg4::Activity::wait_any(acts));
    ++wakeups_;
    const size_t first_delay = flights_.size() + receives_.size();
    if (i < flights_.size()) {
      if (--busy_[flights_[i].to] == 0) busy_.erase(flights_[i].to);
      flights_.erase(flights_.begin() + static_cast<long>(i));
    } else if (i < flights_.size() + receives_.size()) {
      const size_t j = i - flights_.size();
      const Msg m = *receives_[j]->data;
      delete receives_[j]->data;
      receives_.erase(receives_.begin() + static_cast<long>(j));
      --posted_;
      --expected_;
      OnMessage(m);
    } else if (i < first_delay + delays_.size()) {
      const Msg m = delays_[i - first_delay].second;
      delays_.erase(delays_.begin() + static_cast<long>(i - first_delay));
      OnDelayed(m);
    } else {
      exec_ = nullptr;
      OnReduced(exec_tag_);
    }
  }
}

}  // namespace optcast::sim
