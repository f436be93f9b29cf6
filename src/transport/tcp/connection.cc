// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/tcp/connection.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/little_endian.h"

namespace optcast::transport::tcp {

namespace {

constexpr size_t kStagingBytes = 64 * 1024;
constexpr size_t kMaxIov = 64;
// A payload remainder at least this long is received straight into its destination; a shorter
// one is read through staging with whatever follows it (many small messages, one syscall).
constexpr size_t kDirectReceiveBytes = 4096;

}  // namespace

StreamConnection::StreamConnection(posix::Socket socket, uint64_t max_payload, std::string peer,
                                   const TcpOptions& options, bool connecting)
    : socket_(std::move(socket)),
      max_payload_(max_payload),
      peer_(std::move(peer)),
      connecting_(connecting),
      staging_(kStagingBytes),
      traffic_class_(socket_.fd()),
      latency_dscp_(static_cast<uint8_t>(options.latency_dscp)) {}

StreamConnection::~StreamConnection() = default;

void StreamConnection::Send(OutMessage msg) { out_.push_back(std::move(msg)); }

int StreamConnection::DscpOf(TrafficClass c) const {
  switch (c) {
    case TrafficClass::kLatency: return latency_dscp_;
    case TrafficClass::kBulk: return 0;
    case TrafficClass::kUnchanged: break;
  }
  return -1;
}

Status StreamConnection::CheckConnected() {
  if (!connecting_) return Status::Ok();
  bool up = false;
  OPTCAST_RETURN_IF_ERROR(posix::CheckConnect(socket_.fd(), peer_, &up));
  connecting_ = !up;
  return Status::Ok();
}

Status StreamConnection::Flush() {
  OPTCAST_RETURN_IF_ERROR(CheckConnected());
  if (connecting_) return Status::Ok();  // the queue goes out once the socket is writable
  std::vector<std::function<void()>> done;
  Status result;
  while (!out_.empty()) {
    iovec iov[kMaxIov];
    size_t niov = 0;
    size_t skip = out_offset_;
    // One write per traffic class (posix/traffic_class.h says when a switch takes effect).
    int dscp = -1;
    for (auto it = out_.begin(); it != out_.end() && niov + 2 <= kMaxIov; ++it) {
      if (const int want = DscpOf(it->traffic_class); want >= 0) {
        if (dscp >= 0 && want != dscp) break;
        dscp = want;
      }
      const size_t head_len = it->head.size();
      if (skip < head_len) {
        iov[niov++] = {const_cast<uint8_t*>(it->head.data()) + skip, head_len - skip};
        skip = 0;
      } else {
        skip -= head_len;
      }
      if (it->payload_len > 0) {
        iov[niov++] = {const_cast<uint8_t*>(it->payload) + skip, it->payload_len - skip};
      }
      skip = 0;
    }
    if (dscp >= 0) traffic_class_.Prepare(static_cast<uint8_t>(dscp));
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = niov;
    ssize_t n = ::sendmsg(socket_.fd(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      result = UnavailableError("send to " + peer_ + " failed: " + std::strerror(errno));
      break;
    }
    size_t written = static_cast<size_t>(n);
    while (written > 0 && !out_.empty()) {
      OutMessage& front = out_.front();
      const size_t total = front.head.size() + front.payload_len;
      const size_t left = total - out_offset_;
      if (written >= left) {
        written -= left;
        out_offset_ = 0;
        if (front.on_done) done.push_back(std::move(front.on_done));
        out_.pop_front();
      } else {
        out_offset_ += written;
        written = 0;
      }
    }
  }
  for (auto& cb : done) cb();
  return result;
}

Status StreamConnection::ParseFromStaging(MessageHandler& handler, bool* progressed) {
  *progressed = false;
  for (;;) {
    const size_t avail = staged_end_ - staged_begin_;
    if (state_ == ReadState::kHeader) {
      if (avail < kFrameHeaderSize) return Status::Ok();
      const uint8_t* h = staging_.data() + staged_begin_;
      const uint32_t magic = GetU32(h);
      if (magic != kFrameMagic) {
        return ProtocolError("garbage from " + peer_ + ": bad frame magic " + std::to_string(magic) +
                             "; is the peer an Optcast endpoint of the same version?");
      }
      meta_len_ = GetU32(h + 4);
      payload_len_ = GetU64(h + 8);
      if (meta_len_ == 0 || meta_len_ > kMaxMetaBytes) {
        return ProtocolError("frame from " + peer_ + " has a header of " + std::to_string(meta_len_) +
                             " bytes; the limit is " + std::to_string(kMaxMetaBytes));
      }
      if (payload_len_ > max_payload_) {
        return ProtocolError("frame from " + peer_ + " carries " + std::to_string(payload_len_) +
                             " bytes; the limit is " + std::to_string(max_payload_) + " per message");
      }
      staged_begin_ += kFrameHeaderSize;
      state_ = ReadState::kMeta;
      *progressed = true;
      continue;
    }
    if (state_ == ReadState::kMeta) {
      if (avail < meta_len_) return Status::Ok();
      std::span<const uint8_t> meta(staging_.data() + staged_begin_, meta_len_);
      next_is_bulk_ = payload_len_ >= kDirectReceiveBytes;
      payload_dst_ = nullptr;
      OPTCAST_RETURN_IF_ERROR(handler.OnMessageMeta(*this, meta, payload_len_, &payload_dst_));
      staged_begin_ += meta_len_;
      payload_done_ = 0;
      *progressed = true;
      if (payload_len_ == 0) {
        state_ = ReadState::kHeader;
        OPTCAST_RETURN_IF_ERROR(handler.OnMessageComplete(*this));
        continue;
      }
      if (payload_dst_ == nullptr) return InternalError("no destination for a payload from " + peer_);
      state_ = ReadState::kPayload;
      continue;
    }
    // kPayload: drain what the staging buffer already holds.
    if (avail == 0) return Status::Ok();
    const size_t take = static_cast<size_t>(std::min<uint64_t>(avail, payload_len_ - payload_done_));
    std::memcpy(payload_dst_ + payload_done_, staging_.data() + staged_begin_, take);
    staged_begin_ += take;
    payload_done_ += take;
    *progressed = true;
    if (payload_done_ == payload_len_) {
      state_ = ReadState::kHeader;
      OPTCAST_RETURN_IF_ERROR(handler.OnMessageComplete(*this));
    } else {
      return Status::Ok();
    }
  }
}

void StreamConnection::DetachPayloads(const std::function<bool(uint64_t)>& pred) {
  OutQueue kept;
  bool first = true;
  for (OutMessage& m : out_) {
    const bool started = first && out_offset_ > 0;
    first = false;
    if (!pred(m.tag)) {
      kept.push_back(std::move(m));
      continue;
    }
    if (!started) continue;  // never begun: the peer will not miss it
    if (m.payload_len > 0 && !m.keepalive) {
      auto copy = std::shared_ptr<uint8_t[]>(new uint8_t[m.payload_len]);
      std::memcpy(copy.get(), m.payload, m.payload_len);
      m.payload = copy.get();
      m.keepalive = std::move(copy);
    }
    kept.push_back(std::move(m));
  }
  out_ = std::move(kept);
  if (out_.empty()) out_offset_ = 0;
}

void StreamConnection::DropPendingWrites() {
  out_.clear();
  out_offset_ = 0;
}

void StreamConnection::ShutdownWrite() { ::shutdown(socket_.fd(), SHUT_WR); }

bool StreamConnection::DiscardAvailable() {
  for (;;) {
    ssize_t n = ::recv(socket_.fd(), staging_.data(), staging_.size(), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

Status StreamConnection::ReadAvailable(MessageHandler& handler, size_t budget) {
  OPTCAST_RETURN_IF_ERROR(CheckConnected());
  if (connecting_) return Status::Ok();
  size_t consumed = 0;
  for (;;) {
    bool progressed = false;
    OPTCAST_RETURN_IF_ERROR(ParseFromStaging(handler, &progressed));
    if (consumed >= budget) return Status::Ok();
    ssize_t n;
    size_t asked;
    if (state_ == ReadState::kPayload && payload_len_ - payload_done_ >= kDirectReceiveBytes) {
      // A large remainder goes straight into its destination, and the same call reads the frame
      // header and meta of the message after it into staging: one syscall a message when a
      // stream of chunks is queued, and no copy of their payloads. The tail is as long as this
      // message's own header (the next one is likely alike): longer would pull the next payload
      // into staging, to be copied out again.
      staged_begin_ = staged_end_ = 0;  // ParseFromStaging drained it into the payload
      const size_t rest = static_cast<size_t>(payload_len_ - payload_done_);
      iovec iov[2] = {{payload_dst_ + payload_done_, rest},
                      {staging_.data(), std::min(staging_.size(), kFrameHeaderSize + meta_len_)}};
      msghdr mh{};
      mh.msg_iov = iov;
      mh.msg_iovlen = 2;
      asked = rest + iov[1].iov_len;
      n = ::recvmsg(socket_.fd(), &mh, MSG_DONTWAIT);
      if (n > 0) {
        const size_t got = static_cast<size_t>(n);
        payload_done_ += std::min(got, rest);
        staged_end_ = got > rest ? got - rest : 0;
        consumed += got;
        if (payload_done_ == payload_len_) {
          state_ = ReadState::kHeader;
          OPTCAST_RETURN_IF_ERROR(handler.OnMessageComplete(*this));
        }
      }
    } else {
      if (staged_begin_ == staged_end_) {
        staged_begin_ = staged_end_ = 0;
      } else if (staged_begin_ > 0 && staging_.size() - staged_end_ < kMaxMetaBytes + kFrameHeaderSize) {
        std::memmove(staging_.data(), staging_.data() + staged_begin_, staged_end_ - staged_begin_);
        staged_end_ -= staged_begin_;
        staged_begin_ = 0;
      }
      asked = staging_.size() - staged_end_;
      if (next_is_bulk_ && state_ == ReadState::kHeader && staged_end_ == 0) {
        // After a large payload, expect another: read its header alone, so that the payload
        // goes straight to its destination rather than through staging.
        asked = std::min(asked, kFrameHeaderSize + meta_len_);
      }
      n = ::recv(socket_.fd(), staging_.data() + staged_end_, asked, MSG_DONTWAIT);
      if (n > 0) {
        staged_end_ += static_cast<size_t>(n);
        consumed += static_cast<size_t>(n);
      }
    }
    if (n > 0) {
      // A short read took all the socket held. Between messages, return: readiness is
      // level-triggered, so the next message wakes the owner again, and asking now would only
      // hear EAGAIN. Inside one, read on: the rest of a large payload is usually arriving.
      if (static_cast<size_t>(n) < asked) {
        OPTCAST_RETURN_IF_ERROR(ParseFromStaging(handler, &progressed));
        if (state_ == ReadState::kHeader) return Status::Ok();
      }
      continue;
    }
    if (n == 0) return UnavailableError("connection to " + peer_ + " closed by the peer");
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
    if (errno == EINTR) continue;
    return UnavailableError("receive from " + peer_ + " failed: " + std::strerror(errno));
  }
}

}  // namespace optcast::transport::tcp
