// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The hello/authentication exchange of a live server::Server that requires a secret (one per
// process, on 127.0.0.1, on its own thread).
//
// Input: byte 0 chooses the mode, the rest drives it.
//   byte0 & 1 == 0 : raw: the bytes are all the server hears. Nothing may be welcomed (a proof
//                    cannot be guessed).
//   byte0 & 1 == 1 : a valid hello, then the server's challenge is read, then
//     byte0 & 2    :   a proof computed with the right secret over a nonce and hello that the
//                      input's next 48 bytes are XORed into: welcomed exactly when they are all
//                      zero (the proof is for this connection's nonce and hello);
//     otherwise    :   the rest of the bytes as is (a forged or malformed proof, or anything).
// After each input the server must still welcome a properly authenticated hello, and its count
// of authentication failures may only grow.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "auth/proof.h"
#include "frames.h"
#include "live_server.h"

namespace optcast::fuzz {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kSecret[] = "fuzzing-secret-0123456789abcdef";
server::Server* g_server = nullptr;
uint64_t g_jobs = 0;
uint64_t g_failures_seen = 0;
constexpr milliseconds kWait{5000};

void StartServer() {
  setenv("OPTCAST_LOG_LEVEL", "off", 0);
  server::ServerOptions o;
  o.listen = {"127.0.0.1", 0};
  o.secret = kSecret;
  o.job_timeout = milliseconds(2000);
  o.hello_timeout = milliseconds(2000);
  o.max_payload = 1u << 20;
  g_server = &LiveServer::Start(o);
}

int Connect() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(fd >= 0, "socket: %s", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(g_server->port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc;
  do rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  while (rc != 0 && errno == EINTR);
  FUZZ_CHECK(rc == 0 || errno == EISCONN, "connect: %s", std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

void SendAll(int fd, const std::vector<uint8_t>& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the server may close early on garbage
    off += static_cast<size_t>(n);
  }
}

// Reads the next frame's meta; false on close, reset or timeout (the deadline is a bug).
bool ReadMessage(int fd, wire::Message* msg) {
  std::vector<uint8_t> buf;
  const auto deadline = Clock::now() + kWait;
  auto read_exactly = [&](size_t n) {
    buf.resize(n);
    size_t got = 0;
    while (got < n) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      FUZZ_CHECK(left > 0, "the server neither answered nor closed within %lld ms",
                 static_cast<long long>(kWait.count()));
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      const ssize_t k = ::recv(fd, buf.data() + got, n - got, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      got += static_cast<size_t>(k);
    }
    return true;
  };
  if (!read_exactly(transport::kFrameHeaderSize)) return false;
  uint32_t magic = 0, meta_len = 0;
  uint64_t payload = 0;
  std::memcpy(&magic, buf.data(), 4);
  std::memcpy(&meta_len, buf.data() + 4, 4);
  std::memcpy(&payload, buf.data() + 8, 8);
  FUZZ_CHECK(magic == transport::kFrameMagic && meta_len > 0 && meta_len <= transport::kMaxMetaBytes && payload == 0,
             "the server sent a malformed frame header");
  if (!read_exactly(meta_len)) return false;
  Status st = wire::Decode(buf, msg);
  FUZZ_CHECK(st.ok(), "the server sent an undecodable message: %s", st.message().c_str());
  return true;
}

// Reads until the server welcomes, errors, or closes: true when welcomed.
bool Welcomed(int fd) {
  wire::Message m;
  while (ReadMessage(fd, &m)) {
    if (m.type == wire::MsgType::kWelcome) return true;
    if (m.type == wire::MsgType::kError) return false;
    FUZZ_CHECK(m.type == wire::MsgType::kChallenge, "unexpected message type %d", static_cast<int>(m.type));
  }
  return false;
}

wire::Hello FreshHello(uint32_t nranks) {
  wire::Hello h;
  const uint64_t n = ++g_jobs;
  for (int i = 0; i < 8; ++i) h.job_id[i] = static_cast<uint8_t>(n >> (8 * i));
  h.job_id[8] = 0xa7;
  h.nranks = nranks;
  h.rank = 0;
  return h;
}

// Hello, challenge: the nonce (the server must challenge a hello before anything else).
wire::Nonce Challenge(int fd, const wire::Hello& h) {
  SendAll(fd, Frame(wire::EncodeHello(h)));
  wire::Message m;
  FUZZ_CHECK(ReadMessage(fd, &m), "no challenge for a valid hello");
  FUZZ_CHECK(m.type == wire::MsgType::kChallenge, "a valid hello got message type %d instead of a challenge",
             static_cast<int>(m.type));
  return m.challenge;
}

void CheckServerHealthy() {
  const int fd = Connect();
  const wire::Hello h = FreshHello(1);
  const wire::Nonce n = Challenge(fd, h);
  SendAll(fd, Frame(wire::EncodeProof(auth::ComputeProof(kSecret, n, h))));
  FUZZ_CHECK(Welcomed(fd), "a properly authenticated hello was not welcomed");
  ::close(fd);
  const uint64_t failures = g_server->stats().auth_failures;
  FUZZ_CHECK(failures >= g_failures_seen, "the authentication failure count went down");
  g_failures_seen = failures;
}

}  // namespace
}  // namespace optcast::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace optcast;
  using namespace optcast::fuzz;
  if (g_server == nullptr) StartServer();
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::vector<uint8_t> rest(data + 1, data + size);
  const int fd = Connect();
  if ((mode & 1) == 0) {
    SendAll(fd, rest);
    ::shutdown(fd, SHUT_WR);
    FUZZ_CHECK(!Welcomed(fd), "raw bytes were welcomed without a valid proof");
  } else {
    const wire::Hello h = FreshHello(1 + (rest.empty() ? 0 : rest[0] % 4));
    const wire::Nonce nonce = Challenge(fd, h);
    if (mode & 2) {
      wire::Nonce n2 = nonce;
      wire::Hello h2 = h;
      bool changed = false;
      for (size_t i = 0; i < rest.size() && i < 48; ++i) {
        const uint8_t x = rest[i];
        changed = changed || x != 0;
        if (i < 32)
          n2[i] ^= x;
        else if (i < 40)
          h2.job_id[i - 32] ^= x;
        else if (i < 44)
          h2.nranks ^= static_cast<uint32_t>(x) << (8 * (i - 40));
        else
          h2.rank ^= static_cast<uint32_t>(x) << (8 * (i - 44));
      }
      SendAll(fd, Frame(wire::EncodeProof(auth::ComputeProof(kSecret, n2, h2))));
      const bool welcomed = Welcomed(fd);
      FUZZ_CHECK(welcomed == !changed, "a proof over %s nonce/hello was %s", changed ? "another" : "this",
                 welcomed ? "welcomed" : "refused");
    } else {
      SendAll(fd, rest);
      ::shutdown(fd, SHUT_WR);
      FUZZ_CHECK(!Welcomed(fd), "bytes after a challenge were welcomed without a valid proof");
    }
  }
  ::close(fd);
  CheckServerHealthy();
  return 0;
}
