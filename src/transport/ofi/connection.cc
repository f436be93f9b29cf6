// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/ofi/connection.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/env.h"
#include "common/little_endian.h"
#include "transport/ofi/libfabric.h"

namespace optcast::transport::ofi {

namespace {

constexpr uint64_t kHeadTag = 0;
constexpr uint64_t kPayloadTag = uint64_t{1} << 56;
constexpr uint64_t kNumberMask = kPayloadTag - 1;
// Never sent: the tag of the send that opens an endpoint's connection to itself.
constexpr uint64_t kSelfTag = uint64_t{2} << 56;
constexpr size_t kSlotBytes = kFrameHeaderSize + kMaxMetaBytes;
constexpr uint32_t kSendSlots = 32;
constexpr uint32_t kRecvSlots = 16;
// Payloads above this go as several sends (providers cap one message at max_msg_size).
constexpr uint64_t kMaxSegment = uint64_t{1} << 30;

std::atomic<uint64_t> unread_dropped{0};
std::atomic<uint64_t> closes_in_flight{0};

std::string FiError(const char* what, ssize_t rc) {
  return std::string(what) + ": " + Libfabric().strerror(static_cast<int>(-rc));
}

}  // namespace

uint64_t FabricConnection::UnreadMessagesDropped() { return unread_dropped.load(); }
uint64_t FabricConnection::ClosesWithATransferInFlight() { return closes_in_flight.load(); }

Status FabricConnection::Create(std::shared_ptr<Fabric> fabric, posix::Socket control, uint64_t max_payload,
                                std::string peer, std::unique_ptr<FabricConnection>* out) {
  std::unique_ptr<FabricConnection> c(new FabricConnection());
  OPTCAST_RETURN_IF_ERROR(c->Init(std::move(fabric), std::move(control), max_payload, std::move(peer)));
  *out = std::move(c);
  return Status::Ok();
}

Status FabricConnection::Init(std::shared_ptr<Fabric> fabric, posix::Socket control, uint64_t max_payload,
                              std::string peer) {
  fabric_ = std::move(fabric);
  control_ = std::move(control);
  max_payload_ = max_payload;
  peer_ = std::move(peer);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_FD;
  cq_attr.size = 2 * (kSendSlots + kRecvSlots) + 64;
  int rc = fi_cq_open(fabric_->domain(), &cq_attr, &cq_, nullptr);
  if (rc != 0) return UnavailableError(FiError("fi_cq_open", rc));
  rc = fi_control(&cq_->fid, FI_GETWAIT, &cq_fd_);
  if (rc != 0) return UnavailableError(FiError("fi_control(FI_GETWAIT)", rc));
  fi_av_attr av_attr{};
  av_attr.type =
      fabric_->info()->domain_attr->av_type != FI_AV_UNSPEC ? fabric_->info()->domain_attr->av_type : FI_AV_TABLE;
  av_attr.count = 2;  // the peer, and this endpoint itself (HoldConnectionIndex)
  rc = fi_av_open(fabric_->domain(), &av_attr, &av_, nullptr);
  if (rc != 0) return UnavailableError(FiError("fi_av_open", rc));
  rc = fi_endpoint(fabric_->domain(), fabric_->info(), &ep_, nullptr);
  if (rc != 0) return UnavailableError(FiError("fi_endpoint", rc));
  rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
  if (rc != 0) return UnavailableError(FiError("fi_ep_bind(cq)", rc));
  rc = fi_ep_bind(ep_, &av_->fid, 0);
  if (rc != 0) return UnavailableError(FiError("fi_ep_bind(av)", rc));
  rc = fi_enable(ep_);
  if (rc != 0) return UnavailableError(FiError("fi_enable", rc));
  enabled_ = true;
  size_t len = 0;
  rc = fi_getname(&ep_->fid, nullptr, &len);
  local_address_.resize(len > 0 ? len : 256);
  len = local_address_.size();
  rc = fi_getname(&ep_->fid, local_address_.data(), &len);
  if (rc != 0) return UnavailableError(FiError("fi_getname", rc));
  local_address_.resize(len);

  send_slots_.resize(kSendSlots * kSlotBytes);
  recv_slots_.resize(kRecvSlots * kSlotBytes);
  OPTCAST_RETURN_IF_ERROR(fabric_->Acquire(send_slots_.data(), send_slots_.size(), &send_desc_, &send_mr_));
  OPTCAST_RETURN_IF_ERROR(fabric_->Acquire(recv_slots_.data(), recv_slots_.size(), &recv_desc_, &recv_mr_));
  for (uint32_t i = kSendSlots; i > 0; --i) free_send_slots_.push_back(i - 1);
  recv_ops_.resize(kRecvSlots);

  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0 || waker_.fd() < 0) return InternalError(std::string("epoll/eventfd: ") + std::strerror(errno));
  for (int fd : {cq_fd_, waker_.fd(), control_.fd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN | (fd == control_.fd() ? EPOLLRDHUP : 0u);
    ev.data.fd = fd;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return InternalError(std::string("epoll_ctl: ") + std::strerror(errno));
    }
  }
  return Status::Ok();
}

FabricConnection::~FabricConnection() {
  // The endpoint goes first: after that no operation touches a buffer this connection holds.
  if (ep_ != nullptr) {
    Quiesce();
    fi_close(&ep_->fid);
  }
  if (av_ != nullptr) fi_close(&av_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  // No operation is left to touch the memory: its registrations may go back to the cache.
  if (fabric_ != nullptr) {
    for (Posted& p : posted_) ReleasePosted(p);
    ReleaseReceive();
    fabric_->Release(send_mr_);
    fabric_->Release(recv_mr_);
  }
  if (epfd_ >= 0) close(epfd_);
}

Status FabricConnection::SetPeerAddress(const std::vector<uint8_t>& address) {
  const int n = fi_av_insert(av_, address.data(), 1, &peer_addr_, 0, nullptr);
  if (n != 1) return ProtocolError("fabric address of " + peer_ + " was not accepted (fi_av_insert)");
  for (uint32_t i = 0; i < kRecvSlots; ++i) OPTCAST_RETURN_IF_ERROR(PostHeadRecv(i));
  HoldConnectionIndex();
  return Status::Ok();
}

// ofi_rxm keeps an endpoint's connections in an index map whose blocks it frees when their last
// connection goes. A rendezvous request that arrived before its receive was posted keeps only its
// connection's index, and ofi_rxm (1.17) reads the map at that index, unchecked, once the receive
// matches it: after the peer has gone, from a freed block, which crashes the process. A
// connection of the endpoint to itself keeps the block: the lookup then finds no connection and
// the receive fails with an error (Deliver). It is opened by a send that ofi_rxm answers with
// "again" while it connects, and that is never retried: nothing is sent on it. Only over tcp:
// ofi_rxm looks connections up by index only with a shared receive context, its default there.
void FabricConnection::HoldConnectionIndex() {
  const std::string& p = fabric_->provider();
  if (p.rfind("tcp", 0) != 0 || p.find("ofi_rxm") == std::string::npos) return;
  fi_addr_t self = FI_ADDR_UNSPEC;
  if (fi_av_insert(av_, local_address_.data(), 1, &self, 0, nullptr) != 1) return;
  (void)fi_tinject(ep_, nullptr, 0, self, kSelfTag);
}

Status FabricConnection::PostHeadRecv(uint32_t slot) {
  Op& op = recv_ops_[slot];
  op.kind = OpKind::kRecvHead;
  op.slot = slot;
  const Deadline give_up = Deadline::After(std::chrono::seconds(5));
  for (;;) {
    const ssize_t rc = fi_trecv(ep_, recv_slots_.data() + slot * kSlotBytes, kSlotBytes, recv_desc_, FI_ADDR_UNSPEC,
                                kHeadTag, 0, &op.ctx);
    if (rc == 0) {
      op.pending = true;
      heads_.push_back({slot});
      return Status::Ok();
    }
    if (rc != -FI_EAGAIN || give_up.Expired()) return UnavailableError(FiError("fi_trecv", rc));
    OPTCAST_RETURN_IF_ERROR(PollCompletions());
  }
}

size_t FabricConnection::HeadsReady() const {
  size_t n = 0;
  while (n < heads_.size() && heads_[n].done) ++n;
  return n;
}

void FabricConnection::Send(OutMessage msg) { queued_.push_back(std::move(msg)); }

Status FabricConnection::PollCompletions() {
  if (ep_ == nullptr) return broken_;
  fi_cq_tagged_entry entries[16];
  for (;;) {
    const ssize_t n = fi_cq_read(cq_, entries, 16);
    if (n == -FI_EAGAIN) return Status::Ok();
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) < 0) return UnavailableError("fi_cq_readerr failed on " + peer_);
      if (auto* failed = static_cast<Op*>(err.op_context); failed != nullptr) failed->pending = false;
      // Only Quiesce cancels, and it reads its own completions: a cancellation seen here is the
      // provider flushing a connection it closed, so the operation will never end. Reporting it
      // ends the connection now instead of at the caller's timeout.
      if (err.err == FI_ECANCELED) {
        return UnavailableError("fabric operation with " + peer_ +
                                " was cancelled by the provider: its connection was closed");
      }
      const char* text = fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
      return UnavailableError("fabric operation with " + peer_ + " failed: " + Libfabric().strerror(err.err) + " (" +
                              (text ? text : "") + ")");
    }
    if (n < 0) return UnavailableError(FiError("fi_cq_read", n));
    for (ssize_t i = 0; i < n; ++i) {
      Op* op = static_cast<Op*>(entries[i].op_context);
      switch (op->kind) {
        case OpKind::kSendHead:
        case OpKind::kSendPayload: --op->msg->left; break;
        case OpKind::kRecvHead:
          op->pending = false;
          for (HeadRecv& h : heads_) {
            if (h.slot == op->slot && !h.done) {
              h.done = true;
              h.len = entries[i].len;
              break;
            }
          }
          break;
        case OpKind::kRecvPayload:
          op->pending = false;
          if (rx_left_ > 0) --rx_left_;
          break;
        case OpKind::kDiscard: op->pending = false; break;
      }
    }
    // Messages complete in order for the caller, as on a stream.
    while (!posted_.empty() && posted_.front().left == 0 &&
           posted_.front().posted_segments == posted_.front().segments) {
      Posted& p = posted_.front();
      ReleasePosted(p);
      if (p.msg.on_done) done_.push_back(std::move(p.msg.on_done));
      free_send_slots_.push_back(p.slot);
      posted_.pop_front();
    }
  }
}

Status FabricConnection::PostPayloadSegments(Posted* p) {
  while (p->posted_segments < p->segments) {
    const uint64_t off = static_cast<uint64_t>(p->posted_segments) * kMaxSegment;
    const uint64_t len = std::min<uint64_t>(kMaxSegment, p->msg.payload_len - off);
    void* desc = nullptr;
    fid_mr* held = nullptr;
    OPTCAST_RETURN_IF_ERROR(fabric_->Acquire(p->msg.payload + off, len, &desc, &held));
    Op& op = p->ops[1 + p->posted_segments];
    const ssize_t rc =
        fi_tsend(ep_, p->msg.payload + off, len, desc, peer_addr_, kPayloadTag | (p->number & kNumberMask), &op.ctx);
    if (rc != 0) fabric_->Release(held);
    if (rc == -FI_EAGAIN) {
      send_blocked_ = true;
      return Status::Ok();
    }
    if (rc != 0) return UnavailableError("send to " + peer_ + " failed: " + FiError("fi_tsend", rc));
    if (held != nullptr) p->held.push_back(held);
    ++p->posted_segments;
  }
  return Status::Ok();
}

Status FabricConnection::PostQueued() {
  send_blocked_ = false;
  for (;;) {
    if (!posted_.empty() && posted_.back().posted_segments < posted_.back().segments) {
      OPTCAST_RETURN_IF_ERROR(PostPayloadSegments(&posted_.back()));
      if (send_blocked_) return Status::Ok();
    }
    if (queued_.empty() || free_send_slots_.empty()) return Status::Ok();
    OutMessage& m = queued_.front();
    const uint32_t slot = free_send_slots_.back();
    uint8_t* buf = send_slots_.data() + slot * kSlotBytes;
    std::memcpy(buf, m.head.data(), m.head.size());
    posted_.emplace_back();
    Posted& p = posted_.back();
    p.segments = static_cast<uint32_t>((m.payload_len + kMaxSegment - 1) / kMaxSegment);
    p.ops.resize(1 + p.segments);
    for (Op& op : p.ops) {
      op.kind = OpKind::kSendPayload;
      op.msg = &p;
    }
    p.ops[0].kind = OpKind::kSendHead;
    const ssize_t rc = fi_tsend(ep_, buf, m.head.size(), send_desc_, peer_addr_, kHeadTag, &p.ops[0].ctx);
    if (rc == -FI_EAGAIN) {
      posted_.pop_back();
      send_blocked_ = true;
      return Status::Ok();
    }
    if (rc != 0) {
      posted_.pop_back();
      return UnavailableError("send to " + peer_ + " failed: " + FiError("fi_tsend", rc));
    }
    free_send_slots_.pop_back();
    p.slot = slot;
    p.number = tx_number_++;
    p.left = 1 + p.segments;
    p.msg = std::move(m);
    queued_.pop_front();
  }
}

void FabricConnection::RunDoneCallbacks() {
  // Callbacks may queue more messages on this connection: run them from a copy.
  std::vector<std::function<void()>> done;
  done.swap(done_);
  for (auto& cb : done) cb();
}

Status FabricConnection::Flush() {
  if (!broken_.ok()) return broken_;
  if (dialing_) {
    if (Status st = AdvanceDial(); !st.ok()) {
      BreakOff(st);
      return st;
    }
    if (dialing_) return Status::Ok();  // messages wait for the peer's address
  }
  Status st = PollCompletions();
  if (st.ok()) st = PostQueued();
  RunDoneCallbacks();
  if (!st.ok()) {
    BreakOff(st);
    return st;
  }
  Rearm();
  return Status::Ok();
}

bool FabricConnection::ControlOpen() {
  if (peer_closed_) return false;
  uint8_t buf[256];
  for (;;) {
    const ssize_t n = ::recv(control_.fd(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;  // nothing is expected here after the address exchange
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    peer_closed_ = true;
    epoll_ctl(epfd_, EPOLL_CTL_DEL, control_.fd(), nullptr);
    return false;
  }
}

Status FabricConnection::Deliver(MessageHandler& handler) {
  for (;;) {
    if (rx_payload_) {
      if (rx_left_ > 0) return Status::Ok();
      rx_payload_ = false;
      ReleaseReceive();
      OPTCAST_RETURN_IF_ERROR(handler.OnMessageComplete(*this));
      continue;
    }
    if (!HeadReady()) return Status::Ok();
    const HeadRecv head = heads_.front();
    heads_.pop_front();
    const uint8_t* h = recv_slots_.data() + head.slot * kSlotBytes;
    if (head.len < kFrameHeaderSize || GetU32(h) != kFrameMagic) {
      return ProtocolError("garbage from " + peer_ +
                           ": bad frame header; is the peer an Optcast endpoint of the "
                           "same version?");
    }
    const uint32_t meta_len = GetU32(h + 4);
    const uint64_t payload_len = GetU64(h + 8);
    if (meta_len == 0 || meta_len > kMaxMetaBytes || head.len != kFrameHeaderSize + meta_len) {
      return ProtocolError("frame from " + peer_ + " has a header of " + std::to_string(meta_len) + " bytes in a " +
                           std::to_string(head.len) + "-byte message; the limit is " + std::to_string(kMaxMetaBytes));
    }
    if (payload_len > max_payload_) {
      return ProtocolError("frame from " + peer_ + " carries " + std::to_string(payload_len) + " bytes; the limit is " +
                           std::to_string(max_payload_) + " per message");
    }
    uint8_t* dst = nullptr;
    Status st =
        handler.OnMessageMeta(*this, std::span<const uint8_t>(h + kFrameHeaderSize, meta_len), payload_len, &dst);
    OPTCAST_RETURN_IF_ERROR(PostHeadRecv(head.slot));  // the meta has been read: the slot is free
    OPTCAST_RETURN_IF_ERROR(st);
    const uint64_t number = rx_number_++;
    if (payload_len == 0) {
      OPTCAST_RETURN_IF_ERROR(handler.OnMessageComplete(*this));
      continue;
    }
    if (dst == nullptr) return InternalError("no destination for a payload from " + peer_);
    const uint32_t segments = static_cast<uint32_t>((payload_len + kMaxSegment - 1) / kMaxSegment);
    rx_ops_.assign(segments, Op{});
    rx_payload_ = true;
    rx_left_ = segments;
    for (uint32_t s = 0; s < segments; ++s) {
      const uint64_t off = static_cast<uint64_t>(s) * kMaxSegment;
      const uint64_t len = std::min<uint64_t>(kMaxSegment, payload_len - off);
      void* desc = nullptr;
      fid_mr* held = nullptr;
      OPTCAST_RETURN_IF_ERROR(fabric_->Acquire(dst + off, len, &desc, &held));
      if (held != nullptr) rx_held_.push_back(held);
      rx_ops_[s].kind = OpKind::kRecvPayload;
      const Deadline give_up = Deadline::After(std::chrono::seconds(5));
      for (;;) {
        const ssize_t rc = fi_trecv(ep_, dst + off, len, desc, FI_ADDR_UNSPEC, kPayloadTag | (number & kNumberMask), 0,
                                    &rx_ops_[s].ctx);
        if (rc == 0) {
          rx_ops_[s].pending = true;
          break;
        }
        if (rc != -FI_EAGAIN && !ControlOpen()) {
          return UnavailableError("connection to " + peer_ + " closed by the peer before its last payload arrived (" +
                                  FiError("fi_trecv", rc) + ")");
        }
        if (rc != -FI_EAGAIN || give_up.Expired()) return UnavailableError(FiError("fi_trecv", rc));
        OPTCAST_RETURN_IF_ERROR(PollCompletions());
      }
    }
  }
}

Status FabricConnection::ReadAvailable(MessageHandler& handler, size_t) {
  if (!broken_.ok()) return broken_;
  waker_.Drain();
  if (dialing_) {
    if (Status st = AdvanceDial(); !st.ok()) {
      BreakOff(st);
      return st;
    }
    if (dialing_) return Status::Ok();
  }
  const bool open = ControlOpen();
  Status st = PollCompletions();
  if (st.ok()) st = Deliver(handler);
  if (st.ok()) st = PostQueued();
  if (st.ok() && !open) {
    // The peer has gone. What it sent before closing may still be on its way through the
    // provider: collect it for a moment, so that a last error message is not lost.
    int quiet = 0;
    const Deadline give_up = Deadline::After(std::chrono::milliseconds(200));
    while (st.ok() && quiet < 10 && !give_up.Expired()) {
      const size_t before = HeadsReady() + rx_left_;
      const uint64_t received = rx_number_;
      st = PollCompletions();
      if (st.ok()) st = Deliver(handler);
      quiet = (HeadsReady() + rx_left_ == before && rx_number_ == received) ? quiet + 1 : 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (st.ok()) st = UnavailableError("connection to " + peer_ + " closed by the peer");
  }
  RunDoneCallbacks();
  if (!st.ok()) {
    if (st.code() == Code::kUnavailable) BreakOff(st);
    return st;
  }
  Rearm();
  return Status::Ok();
}

void FabricConnection::Rearm() {
  if (ep_ == nullptr) return;
  // A send refused for want of room is retried when one of ours completes (the completion wakes
  // us); only with nothing of ours in flight must we come back unprompted.
  bool again = (send_blocked_ && posted_.empty()) || (!rx_payload_ && HeadReady()) || (rx_payload_ && rx_left_ == 0);
  if (!again) {
    fid* f = &cq_->fid;
    again = fi_trywait(fabric_->fabric(), &f, 1) != FI_SUCCESS;
  }
  if (again) waker_.Wake();
}

void FabricConnection::BreakOff(const Status& why) {
  if (broken_.ok()) broken_ = why;
  if (ep_ != nullptr) {
    Quiesce();
    fi_close(&ep_->fid);
    ep_ = nullptr;
  }
  // The endpoint is closed: no operation touches the payloads any more.
  for (Posted& p : posted_) ReleasePosted(p);
  ReleaseReceive();
  posted_.clear();
  queued_.clear();
  // Readable for good: the owner learns of the break on its next read.
  waker_.Wake();
}

// ofi_rxm (libfabric 1.17) closes a connection's endpoint first and only then handles the
// completions still queued for it, and some of those make it use the closed endpoint: a finished
// rendezvous read answers its sender on it, and a rendezvous request that matches a posted
// receive starts a read on it, both in freed memory. So nothing may be left for them to do:
// every receive no message has matched yet is cancelled, the matched ones are given a moment to
// end (a live peer's transfer finishes, a dead peer's fails), and then the messages that arrived
// with no receive for them are dropped, which ofi_rxm 1.x would otherwise keep for good.
void FabricConnection::Quiesce() {
  // Before fi_enable, ofi_rxm has no completion queue of its own to progress; while dialing,
  // nothing has been posted.
  if (ep_ == nullptr || !enabled_ || dialing_) return;
  std::vector<Op*> receives;
  for (Op& op : recv_ops_) {
    if (op.pending) receives.push_back(&op);
  }
  for (Op& op : rx_ops_) {
    if (op.pending) receives.push_back(&op);
  }
  // A receive already matched is not found, and ends on its own.
  for (Op* op : receives) (void)fi_cancel(&ep_->fid, &op->ctx);
  auto any_pending = [&] {
    return std::any_of(receives.begin(), receives.end(), [](const Op* op) { return op->pending; });
  };
  const Deadline give_up = Deadline::After(std::chrono::milliseconds(500));
  while (ReapCompletions() && any_pending() && !give_up.Expired()) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (any_pending()) closes_in_flight.fetch_add(1);
  DiscardUnexpected();
}

bool FabricConnection::ReapCompletions() {
  auto settle = [&](void* context, bool completed) {
    Op* op = static_cast<Op*>(context);
    if (op == nullptr || op->kind == OpKind::kSendHead || op->kind == OpKind::kSendPayload) return;
    op->pending = false;
    if (op->kind == OpKind::kDiscard) discarded_ = completed;
  };
  fi_cq_tagged_entry entries[16];
  for (;;) {
    const ssize_t n = fi_cq_read(cq_, entries, 16);
    if (n == -FI_EAGAIN) return true;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) < 0) return false;
      settle(err.op_context, false);
      continue;
    }
    if (n < 0) return false;
    for (ssize_t i = 0; i < n; ++i) settle(entries[i].op_context, true);
  }
}

// A receive with FI_PEEK | FI_DISCARD drops the oldest message that arrived unexpected (any tag)
// and completes, or fails with FI_ENOMSG when none is left; both are written before it returns.
// It reads no payload, so it starts no rendezvous. Bounded, as the peer may still be sending.
void FabricConnection::DiscardUnexpected() {
  for (int dropped = 0; dropped < 4096; ++dropped) {
    fi_msg_tagged msg{};
    msg.addr = FI_ADDR_UNSPEC;
    msg.tag = 0;
    msg.ignore = ~uint64_t{0};
    msg.context = &discard_op_.ctx;
    discard_op_.kind = OpKind::kDiscard;
    discard_op_.pending = true;
    discarded_ = false;
    if (fi_trecvmsg(ep_, &msg, FI_PEEK | FI_DISCARD) != 0) return;  // not offered by the provider
    for (int i = 0; i < 100 && discard_op_.pending; ++i) {
      if (!ReapCompletions()) return;
    }
    if (discard_op_.pending || !discarded_) return;
    unread_dropped.fetch_add(1);
  }
}

void FabricConnection::ReleasePosted(Posted& p) {
  for (fid_mr* mr : p.held) fabric_->Release(mr);
  p.held.clear();
}

void FabricConnection::ReleaseReceive() {
  for (fid_mr* mr : rx_held_) fabric_->Release(mr);
  rx_held_.clear();
}

void FabricConnection::DetachPayloads(const std::function<bool(uint64_t)>& pred) {
  OutQueue kept;
  for (OutMessage& m : queued_) {
    if (!pred(m.tag)) kept.push_back(std::move(m));
  }
  queued_ = std::move(kept);
  // Posted sends read the caller's memory until they complete: wait a moment for them, else
  // break the connection off (closing the endpoint ends every operation on it).
  auto in_flight = [&] {
    for (const Posted& p : posted_) {
      if (pred(p.msg.tag) && p.msg.payload_len > 0 && !p.msg.keepalive) return true;
    }
    return false;
  };
  const Deadline give_up = Deadline::After(std::chrono::milliseconds(500));
  while (ep_ != nullptr && in_flight()) {
    if (give_up.Expired() || !PollCompletions().ok()) {
      BreakOff(UnavailableError("connection to " + peer_ + " was abandoned with sends in flight"));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  RunDoneCallbacks();
}

void FabricConnection::DropPendingWrites() { queued_.clear(); }

std::string FabricConnection::SilenceHint() const {
  // Nothing ever posted, messages queued, nothing received: ofi_rxm keeps refusing our sends
  // because it has no connection to the peer, and retries without telling us why. It accepts a
  // send only once connected, after the peer has checked the eager limits, so this is before that.
  if (dialing_ || !broken_.ok() || rx_number_ > 0 || tx_number_ > 0 || queued_.empty()) return {};
  return "no message to " + peer_ +
         " has left over the fabric: ofi_rxm could not connect to its fabric address (unreachable from here, "
         "its process stalled, or refused because the two ends' ofi_rxm eager limits differ: run the same "
         "Optcast release at both ends with the same FI_OFI_RXM_EAGER_LIMIT, FI_OFI_RXM_BUFFER_SIZE, "
         "FI_OFI_RXM_ENABLE_DYN_RBUF and FI_OFI_RXM_ENABLE_DIRECT_SEND, or none of them; FI_LOG_LEVEL=warn at "
         "the server shows a refusal)";
}

void FabricConnection::ShutdownWrite() {
  // While dialing, the control socket still has our address to carry.
  if (dialing_) {
    shut_after_dial_ = true;
    return;
  }
  ::shutdown(control_.fd(), SHUT_WR);
}

bool FabricConnection::DiscardAvailable() {
  waker_.Drain();
  if (dialing_ && broken_.ok()) {
    if (Status st = AdvanceDial(); !st.ok()) {
      BreakOff(st);
      return false;
    }
    if (dialing_) return true;
  }
  if (dialing_) return false;  // the dial failed: nothing will come
  const bool open = ControlOpen();
  if (broken_.ok()) {
    Status st = PollCompletions();
    while (st.ok() && HeadReady()) {
      const uint32_t slot = heads_.front().slot;
      heads_.pop_front();
      st = PostHeadRecv(slot);
    }
    if (st.ok()) st = PostQueued();
    RunDoneCallbacks();
    if (!st.ok()) BreakOff(st);
  }
  if (!open) return false;
  if (broken_.ok()) Rearm();
  return true;
}

}  // namespace optcast::transport::ofi
