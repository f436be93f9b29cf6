// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// One simulated host's event loop: an outbox, an inbox and a reduce queue, all waited on at once.
//
// Outbox: messages leave in the order they were queued, one at a time per destination (a TCP
// connection is a FIFO byte stream: it delivers one message after the other; two at a time let
// the first chunk of every stripe arrive late, docs/scale.md "Calibration"), and at most
// `host_flows` messages at once. Since every
// flow of a host shares its link, the cap changes little but SimGrid's cost, which grows steeply
// with concurrent flows.
// Inbox: the host's mailbox has a permanent receiver, so transfers start as soon as they are sent
// (as TCP does); the loop keeps a few receives posted to learn of arrivals.

#include <cstdint>
#include <deque>
#include <memory>
#include <simgrid/s4u.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace optcast::sim {

// A message between hosts. Chunks carry (stripe, chunk); ring steps carry only their size.
struct Msg {
  enum Kind : uint8_t { kContrib, kResult, kRingStep } kind = kRingStep;
  int stripe = 0;
  int chunk = 0;
  int from = 0;
  uint64_t bytes = 0;
};

class Node {
 public:
  Node(std::string name, simgrid::s4u::Host* host, int host_flows);
  virtual ~Node() = default;

  simgrid::s4u::Mailbox* mailbox() const { return mbox_; }
  simgrid::s4u::Host* host() const { return host_; }
  // Host whose executions stand for pure delays (speed 1, as many cores as needed).
  void set_timer(simgrid::s4u::Host* timer) { timer_ = timer; }

  // The actor body: loops until Done() and nothing is left to send or reduce.
  void Run();

  // Messages (SimGrid flows) and wake-ups (wait_any returns) of all nodes so far: what a run
  // costs, since SimGrid's time grows with both (docs/scale.md, "Cost").
  static uint64_t messages() { return messages_; }
  static uint64_t wakeups() { return wakeups_; }

 protected:
  // Queues a message; `first` puts it ahead of every message not yet on the wire.
  void Send(Node* to, const Msg& m, uint64_t wire_bytes, bool first = false);
  // Runs `flops` (= bytes of input) on this host, then calls OnReduced(tag). One at a time, in order.
  void Reduce(double flops, uint64_t tag);
  // Calls OnDelayed(m) `seconds` from now, without occupying this host.
  void Delay(double seconds, const Msg& m);
  // Messages still to arrive; the loop keeps receives posted only for those.
  void ExpectMessages(uint64_t n) { expected_ += n; }

  virtual void Start() {}
  virtual void OnMessage(const Msg& m) = 0;
  virtual void OnReduced(uint64_t tag) {}
  virtual void OnDelayed(const Msg& m) {}
  virtual bool Done() const = 0;

 private:
  struct Outgoing {
    Node* to;
    Msg* msg;
    uint64_t wire_bytes;
  };
  struct Flight {
    simgrid::s4u::CommPtr comm;
    Node* to;
  };
  struct Receive {
    simgrid::s4u::CommPtr comm;
    Msg* data = nullptr;
  };
  void StartSends();

  std::string name_;
  simgrid::s4u::Host* host_;
  simgrid::s4u::Mailbox* mbox_;
  int host_flows_;
  std::deque<Outgoing> outbox_;
  std::vector<Flight> flights_;
  std::unordered_map<Node*, int> busy_;  // messages on the wire per destination
  std::vector<std::unique_ptr<Receive>> receives_;
  uint64_t expected_ = 0;  // messages not yet received, posted receives included
  uint64_t posted_ = 0;
  std::deque<std::pair<double, uint64_t>> reduce_queue_;  // (flops, tag), run one at a time
  simgrid::s4u::ExecPtr exec_;
  uint64_t exec_tag_ = 0;
  simgrid::s4u::Host* timer_ = nullptr;
  std::vector<std::pair<simgrid::s4u::ExecPtr, Msg>> delays_;
  static inline uint64_t messages_ = 0;
  static inline uint64_t wakeups_ = 0;
};

}  // namespace optcast::sim
