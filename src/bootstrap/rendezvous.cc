// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "bootstrap/rendezvous.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>

namespace optcast::bootstrap {

namespace {
constexpr uint32_t kMaxBlob = 16u << 20;
constexpr uint32_t kHelloMagic = 0x5a56444f;  // "ODVZ"

// The numeric host of a connected socket's local (or remote) end.
std::string SocketHost(int fd, bool remote) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  int rc = remote ? getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                  : getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  char host[NI_MAXHOST] = {0};
  if (rc != 0 || getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "127.0.0.1";
  }
  return host;
}
}  // namespace

Status Rendezvous::Create(const transport::Endpoint& addr, int rank, int nranks, std::chrono::milliseconds timeout,
                          std::unique_ptr<Rendezvous>* out) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return InvalidArgument("rendezvous: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  }
  std::unique_ptr<Rendezvous> rv(new Rendezvous(rank, nranks, timeout));
  const Deadline deadline = Deadline::After(timeout);
  if (rank == 0) {
    transport::posix::Socket listener;
    OPTCAST_RETURN_IF_ERROR(transport::posix::Listen(addr, &listener));
    OPTCAST_RETURN_IF_ERROR(rv->AcceptRanks(listener, deadline));
  } else {
    OPTCAST_RETURN_IF_ERROR(transport::posix::Connect(addr, deadline, &rv->to_root_));
    OPTCAST_RETURN_IF_ERROR(transport::posix::ConfigureDataSocket(rv->to_root_.fd(), false));
    const uint32_t hello[2] = {kHelloMagic, static_cast<uint32_t>(rank)};
    OPTCAST_RETURN_IF_ERROR(transport::posix::SendAll(rv->to_root_.fd(), hello, sizeof(hello), deadline));
    rv->local_host_ = SocketHost(rv->to_root_.fd(), false);
  }
  *out = std::move(rv);
  return Status::Ok();
}

Status Rendezvous::CreateRoot(transport::posix::Socket listener, int nranks, std::chrono::milliseconds timeout,
                              std::unique_ptr<Rendezvous>* out) {
  std::unique_ptr<Rendezvous> rv(new Rendezvous(0, nranks, timeout));
  OPTCAST_RETURN_IF_ERROR(rv->AcceptRanks(listener, Deadline::After(timeout)));
  *out = std::move(rv);
  return Status::Ok();
}

Status Rendezvous::AcceptRanks(const transport::posix::Socket& listener, Deadline deadline) {
  from_ranks_.resize(static_cast<size_t>(nranks_ - 1));
  int joined = 0;
  while (joined < nranks_ - 1) {
    pollfd p{listener.fd(), POLLIN, 0};
    if (::poll(&p, 1, std::max(1, deadline.RemainingMs())) <= 0) {
      return TimeoutError("rendezvous: only " + std::to_string(joined + 1) + " of " + std::to_string(nranks_) +
                          " ranks arrived in time; start every rank with the same --nranks and --rendezvous");
    }
    transport::posix::Socket s;
    if (!transport::posix::Accept(listener, &s).ok()) continue;
    uint32_t hello[2];
    if (!transport::posix::RecvAll(s.fd(), hello, sizeof(hello), deadline).ok()) continue;
    const int r = static_cast<int>(hello[1]);
    if (hello[0] != kHelloMagic || r <= 0 || r >= nranks_ || from_ranks_[r - 1].valid()) {
      continue;  // not one of ours, or a duplicate: ignore it
    }
    if (!transport::posix::ConfigureDataSocket(s.fd(), false).ok()) continue;
    if (joined == 0) local_host_ = SocketHost(s.fd(), false);
    from_ranks_[r - 1] = std::move(s);
    ++joined;
  }
  return Status::Ok();
}

Status Rendezvous::SendBlob(int fd, const std::string& blob) {
  const Deadline d = Deadline::After(timeout_);
  // One write for length and body: two small writes would meet Nagle and delayed ACKs and
  // stall a barrier by tens of milliseconds.
  std::string framed(sizeof(uint32_t), '\0');
  const uint32_t len = static_cast<uint32_t>(blob.size());
  std::memcpy(framed.data(), &len, sizeof(len));
  framed += blob;
  return transport::posix::SendAll(fd, framed.data(), framed.size(), d);
}

Status Rendezvous::RecvBlob(int fd, std::string* blob) {
  const Deadline d = Deadline::After(timeout_);
  uint32_t len = 0;
  Status st = transport::posix::RecvAll(fd, &len, sizeof(len), d);
  if (!st.ok()) return Status(st.code(), "rendezvous: " + st.message() + " (a rank died or is stuck?)");
  if (len > kMaxBlob) return ProtocolError("rendezvous blob of " + std::to_string(len) + " bytes");
  blob->resize(len);
  return transport::posix::RecvAll(fd, blob->data(), len, d);
}

Status Rendezvous::AllGather(const std::string& mine, std::vector<std::string>* all) {
  all->assign(static_cast<size_t>(nranks_), std::string());
  if (rank_ == 0) {
    (*all)[0] = mine;
    for (int r = 1; r < nranks_; ++r) OPTCAST_RETURN_IF_ERROR(RecvBlob(from_ranks_[r - 1].fd(), &(*all)[r]));
    std::string packed;
    for (const auto& s : *all) {
      const uint32_t len = static_cast<uint32_t>(s.size());
      packed.append(reinterpret_cast<const char*>(&len), sizeof(len));
      packed += s;
    }
    for (int r = 1; r < nranks_; ++r) OPTCAST_RETURN_IF_ERROR(SendBlob(from_ranks_[r - 1].fd(), packed));
    return Status::Ok();
  }
  OPTCAST_RETURN_IF_ERROR(SendBlob(to_root_.fd(), mine));
  std::string packed;
  OPTCAST_RETURN_IF_ERROR(RecvBlob(to_root_.fd(), &packed));
  size_t pos = 0;
  for (int r = 0; r < nranks_; ++r) {
    uint32_t len = 0;
    if (packed.size() - pos < sizeof(len)) return ProtocolError("rendezvous: short all-gather reply");
    std::memcpy(&len, packed.data() + pos, sizeof(len));
    pos += sizeof(len);
    if (packed.size() - pos < len) return ProtocolError("rendezvous: short all-gather reply");
    (*all)[r] = packed.substr(pos, len);
    pos += len;
  }
  return Status::Ok();
}

Status Rendezvous::Broadcast(std::string* data) {
  if (rank_ == 0) {
    for (int r = 1; r < nranks_; ++r) OPTCAST_RETURN_IF_ERROR(SendBlob(from_ranks_[r - 1].fd(), *data));
    return Status::Ok();
  }
  return RecvBlob(to_root_.fd(), data);
}

Status Rendezvous::Barrier() {
  std::vector<std::string> all;
  return AllGather(std::string(), &all);
}

}  // namespace optcast::bootstrap
