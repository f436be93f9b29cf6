// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "ring/ring_allreduce.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "common/shard.h"
#include "reduce/combine.h"

namespace optcast::ring {

namespace {
constexpr size_t kPieceBytes = 256 * 1024;
constexpr uint32_t kRingMagic = 0x474e4952;  // "RING"
}  // namespace

Status RingAllReduce::Create(bootstrap::Rendezvous& rv, const std::string& listen_host,
                             std::chrono::milliseconds timeout, std::unique_ptr<RingAllReduce>* out) {
  std::unique_ptr<RingAllReduce> ring(new RingAllReduce(rv.rank(), rv.nranks(), timeout));
  const Deadline deadline = Deadline::After(timeout);
  if (ring->nranks_ == 1) {
    *out = std::move(ring);
    return Status::Ok();
  }
  transport::posix::Socket listener;
  OPTCAST_RETURN_IF_ERROR(transport::posix::Listen({listen_host, 0}, &listener));
  uint16_t port = 0;
  OPTCAST_RETURN_IF_ERROR(transport::posix::LocalPort(listener, &port));
  std::vector<std::string> addrs;
  OPTCAST_RETURN_IF_ERROR(rv.AllGather(listen_host + ":" + std::to_string(port), &addrs));
  transport::Endpoint right_ep;
  OPTCAST_RETURN_IF_ERROR(transport::ParseEndpoint(addrs[(ring->rank_ + 1) % ring->nranks_], &right_ep));
  OPTCAST_RETURN_IF_ERROR(transport::posix::Connect(right_ep, deadline, &ring->right_));
  const uint32_t hello[2] = {kRingMagic, static_cast<uint32_t>(ring->rank_)};
  OPTCAST_RETURN_IF_ERROR(transport::posix::SendAll(ring->right_.fd(), hello, sizeof(hello), deadline));
  const uint32_t left_rank = static_cast<uint32_t>((ring->rank_ + ring->nranks_ - 1) % ring->nranks_);
  while (!ring->left_.valid()) {
    pollfd p{listener.fd(), POLLIN, 0};
    if (::poll(&p, 1, std::max(1, deadline.RemainingMs())) <= 0) {
      return TimeoutError(fmt::format("ring: rank {} never connected to rank {}", left_rank, ring->rank_));
    }
    transport::posix::Socket s;
    if (!transport::posix::Accept(listener, &s).ok()) continue;
    uint32_t got[2];
    if (!transport::posix::RecvAll(s.fd(), got, sizeof(got), deadline).ok()) continue;
    if (got[0] == kRingMagic && got[1] == left_rank) ring->left_ = std::move(s);
  }
  OPTCAST_RETURN_IF_ERROR(transport::posix::ConfigureDataSocket(ring->right_.fd(), true));
  OPTCAST_RETURN_IF_ERROR(transport::posix::ConfigureDataSocket(ring->left_.fd(), true));
  *out = std::move(ring);
  return Status::Ok();
}

template <typename OnPiece>
Status RingAllReduce::Exchange(const uint8_t* send, size_t send_len, uint8_t* recv, size_t recv_len, size_t piece_bytes,
                               OnPiece on_piece) {
  size_t sent = 0;
  size_t received = 0;
  size_t delivered = 0;  // bytes already handed to on_piece
  auto last_progress = Clock::now();
  while (sent < send_len || delivered < recv_len) {
    bool moved = false;
    if (sent < send_len) {
      ssize_t n = ::send(right_.fd(), send + sent, send_len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        moved = true;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return UnavailableError(fmt::format("ring: rank {} lost its right neighbour: {}", rank_, std::strerror(errno)));
      }
    }
    if (received < recv_len) {
      ssize_t n = ::recv(left_.fd(), recv + received, recv_len - received, MSG_DONTWAIT);
      if (n > 0) {
        received += static_cast<size_t>(n);
        moved = true;
      } else if (n == 0) {
        return UnavailableError(fmt::format("ring: rank {} lost its left neighbour (connection closed)", rank_));
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return UnavailableError(fmt::format("ring: rank {} lost its left neighbour: {}", rank_, std::strerror(errno)));
      }
    }
    while (delivered < recv_len && (received - delivered >= piece_bytes || received == recv_len)) {
      const size_t len = std::min(piece_bytes, received - delivered);
      OPTCAST_RETURN_IF_ERROR(on_piece(delivered, len));
      delivered += len;
      moved = true;
    }
    if (moved) {
      last_progress = Clock::now();
      continue;
    }
    if (Clock::now() - last_progress > timeout_) {
      return TimeoutError(fmt::format("ring: rank {} made no progress for {} ms; a neighbour is stuck or dead", rank_,
                                      timeout_.count()));
    }
    pollfd fds[2];
    nfds_t nfds = 0;
    if (sent < send_len) fds[nfds++] = {right_.fd(), POLLOUT, 0};
    if (received < recv_len) fds[nfds++] = {left_.fd(), POLLIN, 0};
    ::poll(fds, nfds, 100);
  }
  return Status::Ok();
}

Status RingAllReduce::AllReduce(const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op) {
  const size_t esize = DataTypeSize(dtype);
  auto* buf = static_cast<uint8_t*>(recvbuf);
  if (sendbuf != recvbuf && count > 0) std::memmove(buf, sendbuf, count * esize);
  if (nranks_ == 1 || count == 0) {
    if (op == RedOp::kAvg) return reduce::FinishAverage(dtype, buf, count, 1);
    return Status::Ok();
  }
  const int n = nranks_;
  // Pieces hold whole elements so each can be reduced on its own.
  const size_t piece = std::max<size_t>(esize, kPieceBytes / esize * esize);
  const size_t max_seg = Shard(count, n, 0).len * esize;
  if (scratch_.size() < max_seg) scratch_.resize(max_seg);
  const RedOp step_op = op == RedOp::kAvg ? RedOp::kSum : op;
  auto seg = [&](int s) { return Shard(count, n, ((s % n) + n) % n); };

  // Reduce-scatter: after n-1 steps rank r owns the full reduction of segment r+1.
  for (int k = 0; k < n - 1; ++k) {
    const Range out = seg(rank_ - k);
    const Range in = seg(rank_ - k - 1);
    uint8_t* dst = buf + in.begin * esize;
    OPTCAST_RETURN_IF_ERROR(Exchange(
        buf + out.begin * esize, out.len * esize, scratch_.data(), in.len * esize, piece, [&](size_t off, size_t len) {
          return reduce::Accumulate(dtype, step_op, dst + off, scratch_.data() + off, len / esize);
        }));
  }
  if (op == RedOp::kAvg) {
    const Range mine = seg(rank_ + 1);
    OPTCAST_RETURN_IF_ERROR(reduce::FinishAverage(dtype, buf + mine.begin * esize, mine.len, n));
  }
  // All-gather: pass the finished segments around.
  for (int k = 0; k < n - 1; ++k) {
    const Range out = seg(rank_ + 1 - k);
    const Range in = seg(rank_ - k);
    OPTCAST_RETURN_IF_ERROR(Exchange(buf + out.begin * esize, out.len * esize, buf + in.begin * esize, in.len * esize,
                                     piece, [](size_t, size_t) { return Status::Ok(); }));
  }
  return Status::Ok();
}

}  // namespace optcast::ring
