// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "scripted_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "raw_client.h"

namespace optcast::e2e {

ScriptedServer::~ScriptedServer() {
  Join();
  CloseAll();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

bool ScriptedServer::Listen() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return false;
  }
  port_ = ntohs(a.sin_port);
  return true;
}

void ScriptedServer::Start(Script script) {
  thread_ = std::thread([this, script = std::move(script)] { ok_ = script(*this, &what_); });
}

bool ScriptedServer::Join() {
  if (thread_.joinable()) thread_.join();
  return ok_;
}

bool ScriptedServer::AcceptAndWelcome(int nranks, std::string* why, const std::vector<uint8_t>& behind_welcome) {
  std::vector<int> accepted;
  for (int r = 0; r < nranks; ++r) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) {
      *why = "no rank connected within 10 s";
      return false;
    }
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      *why = "accept failed";
      return false;
    }
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    accepted.push_back(fd);
  }
  conns_by_rank_.assign(nranks, -1);
  for (int fd : accepted) {
    const RawReply hello = ReadReply(fd);
    if (hello.kind != RawReply::kFrame || hello.msg.type != wire::MsgType::kHello ||
        hello.msg.hello.rank >= static_cast<uint32_t>(nranks) || conns_by_rank_[hello.msg.hello.rank] >= 0) {
      *why = "no hello, or one from a rank out of range or twice";
      ::close(fd);
      continue;
    }
    conns_by_rank_[hello.msg.hello.rank] = fd;
    if (!SendRaw(fd, Concat(Frame(wire::EncodeWelcome({1u << 20, 30000}), 0), behind_welcome))) {
      *why = "welcome not sent";
      return false;
    }
  }
  for (int fd : conns_by_rank_) {
    if (fd < 0) return false;
  }
  return true;
}

bool ScriptedServer::ReadChunk(int fd, ScriptedChunk* chunk, std::string* why) {
  for (;;) {
    const RawReply m = ReadReply(fd);
    if (m.kind != RawReply::kFrame) {
      *why = "a rank's connection ended before its chunk";
      return false;
    }
    std::vector<uint8_t> payload(m.payload_len);
    size_t got = 0;
    while (got < payload.size()) {
      const ssize_t n = ::recv(fd, payload.data() + got, payload.size() - got, 0);
      if (n <= 0) {
        *why = "a chunk's payload was cut short";
        return false;
      }
      got += static_cast<size_t>(n);
    }
    if (m.msg.type == wire::MsgType::kChunk) {
      chunk->desc = m.msg.chunk.desc;
      chunk->ref = m.msg.chunk.ref;
      chunk->payload = std::move(payload);
      return true;
    }
  }
}

bool ScriptedServer::ReadAndSumShare(std::map<uint64_t, ScriptedChunk>* sums, std::string* why) {
  for (int fd : conns_by_rank_) {
    uint64_t got = 0, want = 1;
    while (got < want) {
      ScriptedChunk c;
      if (!ReadChunk(fd, &c, why)) return false;
      if (c.desc.dtype != DataType::kFloat32 || c.desc.coll != CollType::kAllReduce) {
        *why = "the scripted server sums float32 allreduces only";
        return false;
      }
      want = c.desc.server_elems;
      got += c.ref.count;
      auto [it, fresh] = sums->emplace(c.ref.offset, c);
      if (fresh) continue;
      auto* sum = reinterpret_cast<float*>(it->second.payload.data());
      const auto* in = reinterpret_cast<const float*>(c.payload.data());
      for (uint32_t i = 0; i < c.ref.count; ++i) sum[i] += in[i];
    }
  }
  return true;
}

bool ScriptedServer::SendResults(int rank, const std::map<uint64_t, ScriptedChunk>& sums, std::string* why) {
  for (const auto& [offset, c] : sums) {
    const wire::ChunkDone done{c.desc.coll_seq, c.ref};
    if (!SendRaw(conns_by_rank_[rank], Concat(Frame(wire::EncodeResult(done), c.payload.size()), c.payload))) {
      *why = "a result not sent";
      return false;
    }
  }
  return true;
}

bool ScriptedServer::WaitForClose(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  uint8_t byte;
  while (::poll(&p, 1, timeout_ms) == 1) {
    if (::recv(fd, &byte, 1, MSG_DONTWAIT) <= 0) return true;
  }
  return false;
}

void ScriptedServer::CloseAll() {
  for (int& fd : conns_by_rank_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

}  // namespace optcast::e2e
