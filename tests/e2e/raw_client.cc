// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "raw_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/message.h"

namespace optcast::e2e {

int RawConnect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

bool SendRaw(int fd, const std::vector<uint8_t>& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Header (magic, meta_len, payload_len) + meta.
std::vector<uint8_t> Frame(const std::vector<uint8_t>& meta, uint64_t payload_len) {
  const transport::OutMessage m = transport::MakeOutMessage(meta, nullptr, payload_len);
  return std::vector<uint8_t>(m.head.data(), m.head.data() + m.head.size());
}

std::vector<uint8_t> Concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

namespace {

// 0: ok, 1: EOF, 2: timeout, 3: other error.
int RecvExactly(int fd, void* buf, size_t len, std::string* detail) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    const ssize_t n = ::recv(fd, p, len, 0);
    if (n == 0) return 1;
    if (n < 0) {
      if (errno == EINTR) continue;
      *detail = std::strerror(errno);
      return (errno == EAGAIN || errno == EWOULDBLOCK) ? 2 : 3;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

RawReply ReadReply(int fd) {
  RawReply r;
  uint8_t h[transport::kFrameHeaderSize];
  int rc = RecvExactly(fd, h, sizeof(h), &r.detail);
  if (rc == 1) r.kind = RawReply::kClosed;
  if (rc == 2) r.kind = RawReply::kTimeout;
  if (rc == 3) r.kind = RawReply::kReset;
  if (rc != 0) return r;
  uint32_t magic = 0, meta_len = 0;
  std::memcpy(&magic, h, 4);
  std::memcpy(&meta_len, h + 4, 4);
  std::memcpy(&r.payload_len, h + 8, 8);
  if (magic != transport::kFrameMagic || meta_len == 0 || meta_len > transport::kMaxMetaBytes) {
    r.detail = "bad frame header";
    return r;
  }
  std::vector<uint8_t> meta(meta_len);
  if (RecvExactly(fd, meta.data(), meta_len, &r.detail) != 0) {
    r.detail = "frame cut short: " + r.detail;
    return r;
  }
  Status st = wire::Decode(meta, &r.msg);
  if (!st.ok()) {
    r.detail = "undecodable meta: " + st.ToString();
    return r;
  }
  // The documented layout: the version (5), then the type.
  // A refusal of a peer of another version comes in that peer's version (Lane::OnMessageMeta).
  if ((meta[0] != wire::kProtocolVersion && r.msg.type != wire::MsgType::kError) || meta[1] != 0) {
    r.detail = "frame not of protocol version " + std::to_string(wire::kProtocolVersion);
    return r;
  }
  r.kind = RawReply::kFrame;
  return r;
}

// The server answers with an Error frame naming the problem, then closes the connection.
void ExpectErrorThenClose(int fd, Code code, std::initializer_list<const char*> words, const char* what) {
  ASSERT_GE(fd, 0) << what;
  const RawReply r = ReadReply(fd);
  ASSERT_EQ(r.kind, RawReply::kFrame) << what << ": no frame came back (" << r.detail << ")";
  ASSERT_EQ(r.msg.type, wire::MsgType::kError) << what;
  EXPECT_EQ(r.payload_len, 0u) << what;
  EXPECT_EQ(r.msg.error.code, code) << what << ": " << r.msg.error.text;
  for (const char* w : words) {
    EXPECT_NE(r.msg.error.text.find(w), std::string::npos) << what << ": '" << r.msg.error.text << "' lacks " << w;
  }
  const RawReply after = ReadReply(fd);
  EXPECT_TRUE(after.kind == RawReply::kClosed || after.kind == RawReply::kReset)
      << what << ": connection not closed after the error (" << after.kind << " " << after.detail << ")";
}

std::vector<uint8_t> HelloMeta(const JobId& job, uint32_t nranks, uint32_t rank) {
  wire::Hello h;
  h.job_id = job.bytes;
  h.nranks = nranks;
  h.rank = rank;
  return wire::EncodeHello(h);
}

}  // namespace optcast::e2e
