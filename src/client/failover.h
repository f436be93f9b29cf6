// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A client's part in failover (docs/reliability.md).
//
// A rank that sees a server die stops striping new collectives and reports what it saw to the
// servers left: the dead set, its first collective not striped, and the collectives that lack
// results from a dead server. Once every rank reported the same dead set, the first server left
// announces to all: collectives from the lowest unstriped one on are striped again over the
// servers left (epoch + 1), and the dead servers' shares of the earlier ones that any rank
// lacks are re-run there, each rank sending its input or, for a chunk whose result it already
// holds, that result. Every rank applies the same announcements in the same order.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/copy_buffer.h"
#include "client/request.h"
#include "client/request_table.h"
#include "client/server_link.h"
#include "client/striping.h"
#include "optcast/communicator.h"
#include "wire/protocol.h"

namespace optcast::client {

class Failover {
 public:
  // What failover asks of the communicator it belongs to.
  class Host {
   public:
    virtual ~Host() = default;
    // Ok while the communicator works; else why it failed.
    virtual const Status& broken() const = 0;
    // The communicator cannot go on: every collective in flight fails with `why`.
    virtual void Break(const Status& why) = 0;
    // Stripes `req` over the servers of the current epoch.
    virtual void Restripe(Request* req) = 0;
    // Finishes `req` if nothing of it is outstanding.
    virtual void MaybeFinish(Request* req) = 0;
    virtual void FlushAll() = 0;
    // Something moved: the communicator's timeout starts again.
    virtual void NoteProgress() = 0;
  };

  Failover(const CommunicatorOptions& opts, std::vector<ServerLink>& links, RequestTable& requests,
           const Striping& striping, Host& host);

  // Once the servers are joined: whether a server the job drops is told so over its connection
  // (a tree over a byte stream: the server may still carry other racks' ranks; TellLeaving).
  void set_tells_leaving(bool tells) { tells_leaving_ = tells; }

  // No server death is waiting for the job's agreement: new collectives may be striped.
  bool settled() const { return dead_mask_ == agreed_mask_; }
  uint32_t epoch() const { return epoch_; }
  // The servers collectives are striped over now.
  std::vector<uint32_t> Alive() const { return ServersLeft(links_.size(), agreed_mask_); }
  FailoverStats stats() const { return {epoch_, static_cast<uint32_t>(Alive().size())}; }
  // For a timeout: the servers this rank lost that the job has not agreed a failover on yet (the
  // other ranks have not all reported them), or nothing.
  std::string Pending() const;

  // Copies of a new request's input that a re-run may need and the request itself overwrites.
  void PrepareRequest(Request* req);
  // Keeps what a re-run may need of a completed request (see kRetainBytes).
  void Retain(Request& req);
  // The copy buffers' pool.
  CopyBuffer TakeCopyBuffer(uint64_t bytes) { return copy_pool_.Take(bytes); }
  void GiveBackCopyBuffer(CopyBuffer&& b) { copy_pool_.GiveBack(std::move(b)); }

  // What the servers say: another rank lost the servers in `mask`; a failover was agreed; a
  // server applied failover `epoch`.
  void OnNotice(uint64_t mask) { notice_mask_ |= mask; }
  void OnAgreed(wire::FailoverAgreed agreed) { agreed_.push_back(std::move(agreed)); }
  void OnServerEpoch(ServerLink& link, uint32_t epoch);
  // An answer from `link` to an all-gather that a failover striped again, sent before that
  // server applied the failover: it belongs to the replaced stripes.
  bool IsStaleAnswer(const ServerLink& link, uint64_t coll_seq) const;

  // A server is gone: its share waits for the job to agree on a failover. `tell`: its connection
  // still works (the other ranks lost it, or it is silent), so in a tree it is told (TellLeaving).
  void LoseServer(ServerLink& link, const Status& why, bool tell = false);
  // One pass: applies what the servers announced, reports what this rank saw, checks the
  // servers' heartbeats, and closes dead servers' connections.
  void Advance();

 private:
  // Another rank may still lack a result this rank already handed back, when a server dies with
  // it in one rank's socket and not another's. The last few completed collectives keep what a
  // re-run needs from this rank (up to kRetainBytes each): an allreduce its result; a
  // reduce-scatter its input, with its own segment's result in place of that segment's input
  // (a re-run recomputes another rank's segment from every rank's input); an all-gather its own
  // input. An allreduce's copy is taken as its results arrive (ResultLanded), and the copies'
  // buffers are used again: a fresh one costs a page fault per page, which cost far more than
  // the copy itself (docs/reliability.md).
  static constexpr uint64_t kRetainBytes = 16u << 20;
  static constexpr size_t kRetainCount = 4;
  static constexpr size_t kSpareCopies = 4;

  // A retained copy takes part in a re-run as a request of its own, sending the results it holds.
  Request* Revive(uint64_t seq);
  void TellLeaving(ServerLink& link);
  void SendReports();
  void ApplyAgreed(const wire::FailoverAgreed& a);
  // Forgets a collective's stripes so it can be striped again at `epoch`.
  bool Unplan(Request* req, uint32_t epoch);
  // The dead servers' chunks of `req` become one collective over the servers left, round robin.
  void PlanRerun(Request* req, uint32_t epoch, uint64_t newly_dead, uint64_t dead);
  // How a re-run sends a piece: the result this rank holds, or its input.
  uint8_t RerunFlags(const Request& req, const Piece& p) const;
  // Once every server left applied a failover, none sends answers to the stripes it replaced.
  void ForgetRestriped();
  // A server that sends nothing, not even a heartbeat, while this rank waits on it is dead.
  void CheckHeartbeats();

  const CommunicatorOptions& opts_;
  std::vector<ServerLink>& links_;
  RequestTable& requests_;
  const Striping& striping_;
  Host& host_;
  bool tells_leaving_ = false;
  // Server sets are bit masks over the links.
  uint64_t dead_mask_ = 0;        // the servers this rank saw die
  uint64_t agreed_mask_ = 0;      // those the job agreed on: collectives stripe over the rest
  uint32_t epoch_ = 0;            // failovers applied
  uint64_t first_unplanned_ = 0;  // the first collective not striped since a server died
  uint64_t notice_mask_ = 0;      // deaths other ranks saw, from the servers' notices
  std::vector<wire::FailoverAgreed> agreed_;
  bool report_due_ = false;
  std::deque<std::unique_ptr<Request>> retained_;     // see Retain()
  CopyBufferPool copy_pool_{kSpareCopies};            // their buffers, for the next ones
  std::unordered_map<uint64_t, uint32_t> restriped_;  // all-gathers striped again, and at which epoch
};

}  // namespace optcast::client
