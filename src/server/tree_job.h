// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/tree_membership.h"
#include "server/upstream_link.h"
#include "transport/message.h"
#include "wire/protocol.h"

namespace optcast::server {

class ConnectionLoop;
class ServerMetrics;
struct ConnState;
struct Job;
struct Slot;

// A job's place in an aggregation tree (docs/tree.md): its members here, and at a server below
// the root, its link to the parent server. The arithmetic is in tree_math.h, membership and
// sealing in tree_membership.h, the parent handshake in upstream_link.h.
class TreeJob {
 public:
  explicit TreeJob(uint32_t nranks) : members(nranks) {}

  TreeMembership members;
  std::unique_ptr<UpstreamLink> link;  // null at the root
  ConnState* up = nullptr;             // the connection to the parent; null once closed

  bool root() const { return link == nullptr; }
  // A slot is ready once the job is sealed (until then more members may join) and every member
  // contributed.
  bool SlotFull(const Slot& slot) const;
  // What a job that timed out was waiting for: the members here that sent nothing, the ranks
  // that have not joined the tree yet, or the parent.
  std::string WaitingFor(const std::vector<uint32_t>& missing) const;
  // Slots opened while the job was flat hold contributions by rank; a tree holds them by seat.
  void SeatOpenSlots(Job* job) const;

  // Sends to the parent, or holds the message until the parent's welcome.
  void SendUp(ConnectionLoop& loop, ServerMetrics& metrics, transport::OutMessage msg);
  // Sends a slot's combined partial (Slot::result) to the parent; in a failover's re-run, the
  // result copy a member sent instead (flagged as one).
  // `traffic_class`: its collective's (ServerOptions::TrafficClassOf).
  void SendPartialUp(ConnectionLoop& loop, ServerMetrics& metrics, const wire::CollDesc& d, const Slot& slot,
                     transport::TrafficClass traffic_class);
  // Ends this server's membership upstream with `farewell` (a Bye, or the Error that failed the
  // job); before the welcome it is held and the connection closes once it is out.
  void CloseUpstream(ConnectionLoop& loop, const std::vector<uint8_t>& farewell);
};

}  // namespace optcast::server
