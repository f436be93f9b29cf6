// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/failover.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/log.h"
#include "observe/trace.h"

namespace optcast::client {

Failover::Failover(const CommunicatorOptions& opts, std::vector<ServerLink>& links, RequestTable& requests,
                   const Striping& striping, Host& host)
    : opts_(opts), links_(links), requests_(requests), striping_(striping), host_(host) {}

std::string Failover::Pending() const {
  std::string lost;
  for (const auto& s : links_) {
    if (((dead_mask_ & ~agreed_mask_) >> s.index) & 1) lost += (lost.empty() ? "" : ", ") + s.address;
  }
  if (lost.empty()) return "";
  return fmt::format("; this rank lost server(s) {} and the job had not agreed on a failover yet", lost);
}

void Failover::PrepareRequest(Request* req) {
  const uint64_t count = req->desc.count;
  if (count == 0 || !opts_.failover || links_.size() < 2) return;
  const uint64_t bytes = count * req->esize;
  if (req->desc.coll == CollType::kReduceScatter) {
    // In place, this rank's results overwrite its own segment's input, which a re-run after a
    // failover may need again (a result cut short by a dead server): it is kept.
    const uint8_t* own = req->send + static_cast<uint64_t>(opts_.rank) * bytes;
    if (own < req->recv + bytes && req->recv < own + bytes) {
      req->own_input = copy_pool_.Take(bytes);
      std::memcpy(req->own_input.data(), own, bytes);
    }
  }
  if (req->desc.coll == CollType::kAllReduce && bytes <= kRetainBytes) req->copy = TakeCopyBuffer(bytes);
}

void Failover::Retain(Request& req) {
  if (!opts_.failover || req.pieces.empty() || !req.status.ok() || links_.size() < 2) return;
  const uint64_t seg_bytes = req.desc.count * req.esize;
  const uint64_t own = static_cast<uint64_t>(opts_.rank) * seg_bytes;
  const uint64_t bytes =
      req.desc.coll == CollType::kReduceScatter ? seg_bytes * static_cast<uint64_t>(opts_.nranks) : seg_bytes;
  if (bytes > kRetainBytes) return;
  auto r = std::make_unique<Request>();
  r->seq = req.seq;
  r->desc = req.desc;
  r->esize = req.esize;
  switch (req.desc.coll) {
    case CollType::kAllReduce:
      if (!req.copy.empty()) {
        r->copy = std::move(req.copy);
      } else {
        r->copy = TakeCopyBuffer(bytes);
        std::memcpy(r->copy.data(), req.recv, bytes);
      }
      break;
    case CollType::kReduceScatter:
      r->copy = TakeCopyBuffer(bytes);
      std::memcpy(r->copy.data(), req.send, own);
      std::memcpy(r->copy.data() + own, req.recv, seg_bytes);
      std::memcpy(r->copy.data() + own + seg_bytes, req.send + own + seg_bytes, bytes - own - seg_bytes);
      break;
    case CollType::kAllGather:
      r->copy = TakeCopyBuffer(bytes);
      std::memcpy(r->copy.data(), req.recv + own, seg_bytes);
      break;
  }
  r->pieces = req.pieces;
  r->pending_link.assign(links_.size(), 0);
  r->planned = true;
  r->retained = true;
  retained_.push_back(std::move(r));
  if (retained_.size() > kRetainCount) {
    GiveBackCopyBuffer(std::move(retained_.front()->copy));
    retained_.pop_front();
  }
}

Request* Failover::Revive(uint64_t seq) {
  for (auto it = retained_.begin(); it != retained_.end(); ++it) {
    if ((*it)->seq != seq) continue;
    Request* r = it->release();
    retained_.erase(it);
    r->send = r->copy.data();
    r->recv = r->copy.data();
    if (r->desc.coll == CollType::kReduceScatter) {
      r->recv += static_cast<uint64_t>(opts_.rank) * r->desc.count * r->esize;
    }
    Log().info("rank {}: {} #{} had completed here; it takes part in its re-run from the copy kept", opts_.rank,
               CollTypeName(r->desc.coll), seq);
    requests_.Add(r->seq, r);
    return r;
  }
  return nullptr;
}

void Failover::OnServerEpoch(ServerLink& link, uint32_t epoch) {
  link.server_epoch = std::max(link.server_epoch, epoch);
  ForgetRestriped();
}

bool Failover::IsStaleAnswer(const ServerLink& link, uint64_t coll_seq) const {
  if (restriped_.empty()) return false;
  auto it = restriped_.find(coll_seq);
  return it != restriped_.end() && it->second > link.server_epoch;
}

void Failover::ForgetRestriped() {
  if (restriped_.empty()) return;
  uint32_t applied = UINT32_MAX;
  for (const auto& s : links_) {
    if (!s.failed) applied = std::min(applied, s.server_epoch);
  }
  std::erase_if(restriped_, [&](const auto& kv) { return kv.second <= applied; });
}

void Failover::LoseServer(ServerLink& link, const Status& why, bool tell) {
  if (link.failed) return;
  link.failed = true;
  link.queue.clear();
  const bool leave = tell && tells_leaving_ && link.conn != nullptr;
  if (link.rx_req != nullptr && link.rx_piece != SIZE_MAX && link.rx_req->desc.coll == CollType::kAllReduce &&
      link.rx_req->send == link.rx_req->recv && !link.rx_into_copy) {
    link.rx_req->pieces[link.rx_piece].input_lost = true;
  }
  link.rx_into_copy = false;
  Request* stale = link.rx_stale ? link.rx_req : nullptr;
  link.rx_stale = false;
  link.rx_req = nullptr;
  link.rx_piece = SIZE_MAX;
  if (leave) {
    link.conn->DetachPayloads([](uint64_t) { return true; });  // a message half sent is finished from a copy
  } else if (link.conn) {
    link.conn->DropPendingWrites();
  }
  if (settled()) first_unplanned_ = requests_.next_seq();
  dead_mask_ |= uint64_t{1} << link.index;
  if (leave) TellLeaving(link);
  const size_t left = ServersLeft(links_.size(), dead_mask_).size();
  if (left == 0) {
    host_.Break(UnavailableError(why.message() + "; no server of the job is left"));
    return;
  }
  if (stale != nullptr) {
    --stale->stale_rx;
    host_.MaybeFinish(stale);
  }
  ForgetRestriped();
  Log().warn("rank {}: {}; failing over to the {} server(s) left", opts_.rank, why.message(), left);
  if (observe::TraceOn()) {
    observe::TraceArgs a;
    a.Add("server", link.address).Add("why", why.message());
    observe::TraceInstant("server lost", "client", a);
  }
  report_due_ = true;
  // A dead server takes all its lanes: they go in the same report, so that the job agrees on the
  // server's death once, not lane by lane.
  for (ServerLink& sibling : links_) {
    if (sibling.server == link.server && !sibling.failed) {
      LoseServer(sibling, UnavailableError(fmt::format("{} went with {}", sibling.address, link.address)), tell);
    }
  }
}

// In an aggregation tree a server of the tree the job drops may still be alive, with ranks of
// other racks still on it: were this rank to close its connection, that server would fail the
// job for them as a rank that died. So it is told instead (a report naming itself dead), and gives
// the job up without error to anyone (docs/tree.md, "Failure"); the connection stays open and
// what comes on it is thrown away until the server closes it, so that no reset can drop the word.
void Failover::TellLeaving(ServerLink& link) {
  wire::FailoverReport r;
  r.epoch = epoch_;
  r.server_index = static_cast<uint32_t>(link.index);
  r.dead_mask = dead_mask_;
  r.first_unplanned = first_unplanned_;
  link.SendControl(wire::EncodeFailover(r));
  if (!link.conn->Flush().ok()) {
    link.conn.reset();
    return;
  }
  link.leaving = true;
}

void Failover::Advance() {
  for (uint32_t i = 0; i < links_.size() && notice_mask_ != 0; ++i) {
    if (((notice_mask_ >> i) & 1) && !links_[i].failed) {
      LoseServer(links_[i], UnavailableError(fmt::format("other ranks lost server {}", links_[i].address)),
                 /*tell=*/true);
    }
  }
  notice_mask_ = 0;
  for (size_t i = 0; i < agreed_.size() && host_.broken().ok(); ++i) {
    if (agreed_[i].epoch <= epoch_) continue;  // the same announcement from another survivor
    if (agreed_[i].epoch != epoch_ + 1) {
      host_.Break(ProtocolError(
          fmt::format("a server announced failover {} while this rank is at {}", agreed_[i].epoch, epoch_)));
      break;
    }
    ApplyAgreed(agreed_[i]);
  }
  agreed_.clear();
  if (report_due_ && host_.broken().ok()) SendReports();
  if (host_.broken().ok()) CheckHeartbeats();
  // A dead server's connection goes now, with whatever it had posted into our buffers; one that
  // was told this rank leaves it once it has closed its end (TellLeaving).
  for (auto& s : links_) {
    if (!s.failed || !s.conn) continue;
    if (s.leaving && (!s.conn->HasPendingWrites() || s.conn->Flush().ok()) && s.conn->DiscardAvailable()) continue;
    s.conn.reset();
  }
}

void Failover::SendReports() {
  report_due_ = false;
  wire::FailoverReport r;
  r.epoch = epoch_;
  r.dead_mask = dead_mask_;
  r.first_unplanned = first_unplanned_;
  for (const Request* req : requests_.Roots()) {
    if (!req->planned) continue;
    for (const Piece& p : req->pieces) {
      if (p.due && links_[p.link].failed) {
        r.needing.push_back(req->seq);
        break;
      }
    }
  }
  if (r.needing.size() > wire::kMaxFailoverSeqs) {
    host_.Break(
        UnavailableError(fmt::format("{} collectives lack results from a dead server; failover re-runs at most {}",
                                     r.needing.size(), wire::kMaxFailoverSeqs)));
    return;
  }
  std::sort(r.needing.begin(), r.needing.end());
  for (auto& s : links_) {
    if (s.failed) continue;
    r.server_index = static_cast<uint32_t>(s.index);
    s.SendControl(wire::EncodeFailover(r));
  }
  host_.FlushAll();
}

void Failover::ApplyAgreed(const wire::FailoverAgreed& a) {
  for (uint32_t i = 0; i < links_.size(); ++i) {
    if (((a.dead_mask >> i) & 1) && !links_[i].failed) {
      LoseServer(links_[i], UnavailableError(fmt::format("the job agreed that server {} is dead", links_[i].address)),
                 /*tell=*/true);
    }
  }
  if (!host_.broken().ok()) return;
  const uint64_t newly = a.dead_mask & ~agreed_mask_;
  if ((a.dead_mask & agreed_mask_) != agreed_mask_ || newly == 0 || a.boundary > first_unplanned_) {
    host_.Break(
        ProtocolError(fmt::format("failover {} announced dead servers {:#x} from #{}, which does not follow this "
                                  "rank's view (dead {:#x}, agreed {:#x}, first unstriped #{})",
                                  a.epoch, a.dead_mask, a.boundary, dead_mask_, agreed_mask_, first_unplanned_)));
    return;
  }
  const std::vector<Request*> roots = requests_.Roots();
  // Collectives from the boundary on never completed a chunk (the rank that stopped first never
  // sent them): forget their old stripes.
  for (Request* req : roots) {
    if (req->seq >= a.boundary && req->planned && !Unplan(req, a.epoch)) return;
  }
  for (uint64_t seq : a.recover) {
    Request* req = requests_.Find(seq);
    if (req == nullptr) req = Revive(seq);
    if (req == nullptr || !req->planned || req->pieces.empty()) {
      host_.Break(Status(Code::kPeerFailed,
                         fmt::format("collective #{} had already completed on rank {} when server(s) {:#x} died, while "
                                     "another rank still lacked part of its result; it cannot be re-run exactly",
                                     seq, opts_.rank, newly)));
      return;
    }
    PlanRerun(req, a.epoch, newly, a.dead_mask);
  }
  agreed_mask_ = a.dead_mask;
  epoch_ = a.epoch;
  const auto epoch_meta = wire::EncodeEpoch({a.epoch, a.dead_mask, a.boundary});
  for (auto& s : links_) {
    if (!s.failed) s.SendControl(epoch_meta);
  }
  const bool more_dead = !settled();
  for (Request* req : roots) {
    if (!req->planned && (req->seq < first_unplanned_ || !more_dead)) host_.Restripe(req);
  }
  if (more_dead) report_due_ = true;
  host_.NoteProgress();
  const size_t left = Alive().size();
  Log().warn(
      "rank {}: failover {}: {} server(s) left; {} collective(s) re-run the dead servers' shares, "
      "collectives from #{} are striped over the servers left",
      opts_.rank, a.epoch, left, a.recover.size(), a.boundary);
  if (observe::TraceOn()) {
    observe::TraceArgs t;
    t.Add("epoch", a.epoch).Add("servers_left", left).Add("rerun", a.recover.size()).Add("boundary", a.boundary);
    observe::TraceInstant("failover", "client", t);
  }
}

// Chunks already handed to a connection took window credit that no answer will return (the
// server drops them). An all-gather chunk needs no other rank's, so one may have reached this
// rank already, and more may still come until each server applied the failover: they are the
// same bytes as the new stripes bring, and land without counting (IsStaleAnswer).
bool Failover::Unplan(Request* req, uint32_t epoch) {
  if (req->pieces.empty()) {
    host_.Break(InternalError(fmt::format("collective #{} cannot be striped again", req->seq)));
    return false;
  }
  const bool gather = req->desc.coll == CollType::kAllGather;
  for (const Piece& p : req->pieces) {
    if (p.have && !gather) {
      host_.Break(
          InternalError(fmt::format("collective #{} got a result before a failover striped it again", req->seq)));
      return false;
    }
  }
  if (gather) {
    restriped_[req->seq] = epoch;
    for (auto& s : links_) {
      if (s.rx_req == req && !s.rx_stale) {
        s.rx_stale = true;
        ++req->stale_rx;
      }
    }
  }
  for (auto& s : links_) {
    std::unordered_map<uint64_t, bool> unsent;
    for (auto it = s.queue.begin(); it != s.queue.end();) {
      if (it->req != req) {
        ++it;
        continue;
      }
      for (size_t k = it->next; k < it->chunks.size(); ++k) unsent[it->chunks[k].offset] = true;
      it = s.queue.erase(it);
    }
    if (s.failed) continue;
    for (const Piece& p : req->pieces) {
      if (p.link == s.index && !p.have && striping_.Sends(*req, p.ref) && unsent.count(p.ref.offset) == 0) {
        s.window.OnReturned(p.ref.count * req->esize);
      }
    }
  }
  req->pieces.clear();
  req->pending_link.assign(links_.size(), 0);
  req->outstanding = 0;
  req->planned = false;
  return true;
}

void Failover::PlanRerun(Request* req, uint32_t epoch, uint64_t newly_dead, uint64_t dead) {
  const std::vector<uint32_t> alive = ServersLeft(links_.size(), dead);
  const uint64_t rseq = wire::RecoverySeq(epoch, req->seq);
  std::vector<PendingSends> per(alive.size(), PendingSends{req, req->desc, {}, 0, {}});
  for (auto& ps : per) {
    ps.desc.coll_seq = rseq;
    ps.desc.server_elems = 0;
    ps.desc.epoch = epoch;
  }
  // Round robin within each segment, so that an all-gather's re-run gives every server it uses
  // a chunk of every rank (a server forwards a chunk only to ranks that joined it there).
  size_t k = 0;
  uint32_t segment = 0;
  for (Piece& p : req->pieces) {
    if (((newly_dead >> p.link) & 1) == 0) continue;
    if (p.ref.segment != segment) {
      segment = p.ref.segment;
      k = 0;
    }
    const size_t j = static_cast<size_t>((k++ + req->seq) % alive.size());
    // Still counted as due from the dead server. Not `!p.have`: a piece this rank had from the
    // first server, whose re-run then died too, has its result but waits for an answer.
    if (p.due) {
      --req->pending_link[p.link];
      --req->outstanding;
    }
    p.link = alive[j];
    p.coll_seq = rseq;
    p.awaiting = true;
    p.due = true;
    ++req->pending_link[p.link];
    ++req->outstanding;
    per[j].desc.server_elems += p.ref.count;
    if (!striping_.Sends(*req, p.ref)) continue;
    per[j].chunks.push_back(p.ref);
    per[j].flags.push_back(RerunFlags(*req, p));
  }
  for (size_t j = 0; j < alive.size(); ++j) {
    if (!per[j].chunks.empty() && !links_[alive[j]].failed) links_[alive[j]].queue.push_back(std::move(per[j]));
  }
  requests_.Add(rseq, req);
  req->rerun_seqs.push_back(rseq);
}

// The result a rank holds is the same on every rank that holds it (an allreduce's, or a
// reduce-scatter's own segment).
uint8_t Failover::RerunFlags(const Request& req, const Piece& p) const {
  switch (req.desc.coll) {
    case CollType::kAllReduce:
      return p.have ? wire::kChunkResultCopy : p.input_lost ? wire::kChunkInputLost : uint8_t{0};
    case CollType::kReduceScatter:
      return p.have && p.ref.segment == static_cast<uint32_t>(opts_.rank) ? wire::kChunkResultCopy : uint8_t{0};
    case CollType::kAllGather: return 0;
  }
  return 0;
}

void Failover::CheckHeartbeats() {
  const auto now = Clock::now();
  for (auto& s : links_) {
    if (s.failed) continue;
    const bool busy = !s.queue.empty() || requests_.AnyWaitingOn(s.index);
    if (busy && !s.busy) s.last_heard = now;
    s.busy = busy;
    if (busy && now - s.last_heard > opts_.heartbeat) {
      LoseServer(s,
                 UnavailableError(fmt::format(
                     "server {} sent nothing for {} ms while this rank waited on it; it may be frozen "
                     "(OPTCAST_HEARTBEAT_MS sets the bound)",
                     s.address, std::chrono::duration_cast<std::chrono::milliseconds>(now - s.last_heard).count())),
                 /*tell=*/true);
    }
  }
}

}  // namespace optcast::client
