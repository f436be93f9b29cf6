// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// What the servers send a client: results and acks of the collectives in flight, where each
// result lands, and the messages of failover, heartbeats and stall reports.

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "client/server_communicator.h"
#include "common/log.h"

namespace optcast::client {

Status ServerCommunicator::OnMessageMeta(transport::Connection& c, std::span<const uint8_t> meta, uint64_t payload_len,
                                         uint8_t** payload_dst) {
  auto* link = static_cast<ServerLink*>(c.user_data);
  wire::Message msg;
  OPTCAST_RETURN_IF_ERROR(wire::Decode(meta, &msg));
  link->last_heard = Clock::now();
  if (msg.type == wire::MsgType::kHeartbeat) return Status::Ok();     // alive, but no progress
  if (msg.type == wire::MsgType::kStallReport && payload_len == 0) {  // an answer, not progress
    stall_.OnReport(link->index, msg.stall_report.coll_seq, std::move(msg.stall_report.waiting_for));
    return Status::Ok();
  }
  last_progress_ = link->last_heard;
  if (msg.type == wire::MsgType::kError) {
    return Status(msg.error.code, "server " + link->address + ": " + msg.error.text);
  }
  if (msg.type == wire::MsgType::kNotice || msg.type == wire::MsgType::kAgreed || msg.type == wire::MsgType::kEpoch) {
    return OnFailoverMessage(*link, msg, payload_len);
  }
  if (msg.type != wire::MsgType::kResult && msg.type != wire::MsgType::kAck) {
    return ProtocolError(
        fmt::format("server {} sent unexpected message type {}", link->address, static_cast<int>(msg.type)));
  }
  return OnAnswer(*link, msg, payload_len, payload_dst);
}

Status ServerCommunicator::OnFailoverMessage(ServerLink& link, wire::Message& msg, uint64_t payload_len) {
  if (msg.type == wire::MsgType::kEpoch) {
    if (!opts_.failover || payload_len != 0) {
      return ProtocolError(fmt::format("server {} sent a failover epoch to a rank with failover off", link.address));
    }
    failover_.OnServerEpoch(link, msg.epoch.epoch);
    return Status::Ok();
  }
  if (!opts_.failover || payload_len != 0) {
    return ProtocolError(fmt::format("server {} sent a failover message to a rank with failover off", link.address));
  }
  const uint64_t mask = msg.type == wire::MsgType::kNotice ? msg.notice_mask : msg.agreed.dead_mask;
  if ((mask >> link.index) & 1 || (servers_.size() < 64 && (mask >> servers_.size()) != 0)) {
    return ProtocolError(fmt::format("server {} (server {} of {}) announced dead servers {:#x}", link.address,
                                     link.index, servers_.size(), mask));
  }
  if (msg.type == wire::MsgType::kNotice) {
    failover_.OnNotice(mask);
  } else {
    failover_.OnAgreed(std::move(msg.agreed));
  }
  return Status::Ok();
}

Status ServerCommunicator::OnAnswer(ServerLink& link, const wire::Message& msg, uint64_t payload_len,
                                    uint8_t** payload_dst) {
  if (failover_.IsStaleAnswer(link, msg.done.coll_seq)) {
    // An all-gather chunk of stripes a failover replaced: the same bytes come again.
    Log().debug("rank {}: server {} answered all-gather #{} on stripes a failover replaced; discarded", opts_.rank,
                link.address, msg.done.coll_seq);
    link.LandInSink(payload_len, payload_dst);
    return Status::Ok();
  }
  Request* req = requests_.Find(msg.done.coll_seq);
  if (req == nullptr) {
    return ProtocolError(
        fmt::format("server {} answered collective #{}, which is not in flight", link.address, msg.done.coll_seq));
  }
  const wire::ChunkRef& ref = msg.done.ref;
  // The piece of `req` this answer is for, when failover tracks pieces; SIZE_MAX when it does not.
  // An error when `link` does not owe it.
  auto owed_piece = [&](const char* what, size_t* index) -> Status {
    *index = SIZE_MAX;
    if (req->pieces.empty()) return Status::Ok();
    const size_t i = req->FindPiece(ref.offset);
    if (i == SIZE_MAX || req->pieces[i].ref.count != ref.count || req->pieces[i].coll_seq != msg.done.coll_seq ||
        req->pieces[i].link != link.index || !req->pieces[i].awaiting) {
      return ProtocolError(fmt::format("server {} {} [{}, +{}) of collective #{} that it does not owe", link.address,
                                       what, ref.offset, ref.count, req->seq));
    }
    req->pieces[i].awaiting = false;
    *index = i;
    return Status::Ok();
  };
  if (msg.type == wire::MsgType::kAck) {
    if (payload_len != 0) return ProtocolError("ack with a payload");
    size_t i = SIZE_MAX;
    OPTCAST_RETURN_IF_ERROR(owed_piece("acked a chunk", &i));
    if (i != SIZE_MAX) {
      req->pieces[i].due = false;
      req->pieces[i].have = true;
    }
    link.window.OnReturned(ref.count * req->esize);
    Complete(req, link.index);
    return Status::Ok();
  }
  const uint64_t count = req->desc.count;
  const uint64_t me = static_cast<uint64_t>(opts_.rank);
  uint64_t dst_elem = 0;
  bool ok = false;
  switch (req->desc.coll) {
    case CollType::kAllReduce:
      ok = ref.segment == 0 && ref.offset <= count && ref.count <= count - ref.offset;
      dst_elem = ref.offset;
      break;
    case CollType::kReduceScatter:
      ok = ref.segment == me && ref.offset >= me * count && ref.offset - me * count <= count &&
           ref.count <= count - (ref.offset - me * count);
      dst_elem = ref.offset - me * count;
      break;
    case CollType::kAllGather:
      ok = ref.segment != me && ref.segment < static_cast<uint64_t>(opts_.nranks) &&
           ref.offset >= ref.segment * count && ref.offset - ref.segment * count <= count &&
           ref.count <= count - (ref.offset - ref.segment * count);
      dst_elem = ref.offset;
      break;
  }
  if (!ok || payload_len != static_cast<uint64_t>(ref.count) * req->esize) {
    return ProtocolError(fmt::format("server {} sent a result [{}, +{}) that does not fit collective #{}", link.address,
                                     ref.offset, ref.count, req->seq));
  }
  link.rx_piece = SIZE_MAX;
  OPTCAST_RETURN_IF_ERROR(owed_piece("sent a result", &link.rx_piece));
  link.rx_into_copy = false;
  if (req->retained) {
    // A kept copy re-sends what another rank lacks; what comes back is already handed back.
    link.LandInSink(payload_len, payload_dst);
  } else if (req->desc.coll == CollType::kAllReduce && !req->copy.empty() && req->send == req->recv) {
    // In place, a result written straight into the caller's buffer destroys this rank's input
    // as it lands, and a server that dies halfway leaves neither. It lands in the copy kept for
    // failover instead and is copied over whole (the one copy either way), so a re-run still
    // has the input.
    *payload_dst = req->copy.data() + dst_elem * req->esize;
    link.rx_into_copy = true;
  } else {
    *payload_dst = req->recv + dst_elem * req->esize;
  }
  if (link.trace_track != 0) link.rx_start_us = observe::TraceNowUs();
  link.rx_req = req;
  link.rx_credit = req->desc.coll != CollType::kAllGather;
  link.rx_bytes = payload_len;
  link.rx_first = dst_elem;
  link.rx_elems = ref.count;
  return Status::Ok();
}

Status ServerCommunicator::OnMessageComplete(transport::Connection& c) {
  auto* link = static_cast<ServerLink*>(c.user_data);
  if (link->rx_req == nullptr) return Status::Ok();
  if (link->rx_credit) link->window.OnReturned(link->rx_bytes);
  Request* req = link->rx_req;
  link->rx_req = nullptr;
  if (link->rx_stale) {  // a result of replaced stripes (Unplan): it landed, and counts for nothing
    link->rx_stale = false;
    link->rx_piece = SIZE_MAX;
    --req->stale_rx;
    MaybeFinish(req);
    return Status::Ok();
  }
  if (link->rx_piece != SIZE_MAX) {
    const Piece& p = req->pieces[link->rx_piece];
    req->pieces[link->rx_piece].have = true;
    req->pieces[link->rx_piece].due = false;
    // The copy a completed allreduce keeps (Failover::Retain) is taken chunk by chunk, while each
    // is hot.
    if (!req->copy.empty() && !req->retained) {
      uint8_t* const kept = req->copy.data() + p.ref.offset * req->esize;
      uint8_t* const caller = req->recv + p.ref.offset * req->esize;
      const uint64_t bytes = p.ref.count * req->esize;
      link->rx_into_copy ? std::memcpy(caller, kept, bytes) : std::memcpy(kept, caller, bytes);
    }
  }
  // float32 on a 16-bit wire: the result is in the staging buffer (from the copy, if it landed
  // there), still in cache; the caller's buffer gets it widened.
  if (req->narrowing && !req->retained) req->narrowing->WidenResult(link->rx_first, link->rx_elems);
  link->rx_piece = SIZE_MAX;
  link->rx_into_copy = false;
  last_progress_ = Clock::now();
  if (link->trace_track != 0) {
    observe::TraceArgs a;
    a.Add("seq", req->seq).Add("bytes", link->rx_bytes);
    observe::TraceComplete("result", "client", link->rx_start_us, observe::TraceNowUs(), a, link->trace_track);
  }
  Complete(req, link->index);
  return Status::Ok();
}

void ServerCommunicator::ReadEarlyMessages() {
  for (ServerLink& s : servers_) {
    if (s.early.empty()) continue;
    std::vector<std::vector<uint8_t>> early;
    early.swap(s.early);
    for (const std::vector<uint8_t>& meta : early) {
      if (s.failed) break;
      uint8_t* unused = nullptr;
      Status st = OnMessageMeta(*s.conn, meta, 0, &unused);
      if (st.ok()) st = OnMessageComplete(*s.conn);
      if (!st.ok()) FailLink(s, st);
    }
  }
}

}  // namespace optcast::client
