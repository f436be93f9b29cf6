// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A live server::Server (one per process, on 127.0.0.1, port 0, on its own thread) fed arbitrary
// bytes over TCP.
//
// Input: byte 0 chooses the prelude and the pace, the rest is sent as is.
//   byte0 & 3 == 0 : no prelude: the bytes are the first thing the server hears (hello path).
//   byte0 & 3 == k : a valid hello for a fresh job of k ranks (1..3) as rank ((byte0 >> 2) & 3) % k,
//                    so that the bytes reach chunk handling (with 1 rank, reduction and results).
//   byte0 & 16     : linger: after sending, wait until the server is quiet (3 ms without a byte)
//                    before half-closing, so that its replies go out before it sees the end of
//                    the stream (it drops what it had queued for a rank that left).
//   byte0 & 32     : all ranks (with a prelude of 2 or 3 ranks): one connection per rank, each
//                    sending its hello and then the same bytes, so chunks meet and get reduced
//                    across ranks.
// Per input: connect, send prelude + bytes while reading, half-close, read until the server
// closes (or a deadline), close. Then the server must (a) welcome a fresh hello on a second
// connection and (b) become idle: no connection, no job, no chunk buffer outstanding.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "frames.h"
#include "live_server.h"
#include "optcast/status.h"
#include "server/server.h"
#include "transport/message.h"
#include "wire/protocol.h"

namespace optcast::fuzz {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The server runs for the whole process; it is never stopped (libFuzzer exits the process).
server::Server* g_server = nullptr;
uint16_t g_port = 0;
uint64_t g_job_counter = 0;
// How long the server may take to answer or to close (OPTCAST_FUZZ_WAIT_MS, default 5000 ms).
milliseconds g_wait{5000};

void StartServer() {
  // The server's refusals are expected here; keep the fuzzer's output readable.
  setenv("OPTCAST_LOG_LEVEL", "off", /*overwrite=*/0);
  if (const char* w = std::getenv("OPTCAST_FUZZ_WAIT_MS")) g_wait = milliseconds(std::atoi(w));
  server::ServerOptions o;
  o.listen = {"127.0.0.1", 0};
  o.job_timeout = milliseconds(2000);
  o.hello_timeout = milliseconds(2000);
  o.max_payload = 1u << 20;  // keeps the pool's memory small; the fuzzer's inputs are smaller still
  g_server = &LiveServer::Start(o);
  g_port = g_server->port();
}

// A non-blocking connection to the server. (libFuzzer's SIGALRM timer interrupts blocking calls,
// so every wait here is a poll that retries on EINTR.)
int Connect() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  FUZZ_CHECK(fd >= 0, "socket: %s", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(g_port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    FUZZ_CHECK(errno == EINPROGRESS || errno == EINTR, "connect: %s", std::strerror(errno));
    const auto deadline = Clock::now() + g_wait;
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      FUZZ_CHECK(left > 0, "the server did not accept a connection within %lld ms",
                 static_cast<long long>(g_wait.count()));
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r > 0) break;
      FUZZ_CHECK(r == 0 || errno == EINTR, "poll: %s", std::strerror(errno));
    }
    int err = 0;
    socklen_t len = sizeof(err);
    FUZZ_CHECK(::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0, "connect: %s", std::strerror(err));
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

wire::JobIdBytes FreshJobId(uint8_t tag) {
  wire::JobIdBytes id{};
  const uint64_t n = ++g_job_counter;
  for (int i = 0; i < 8; ++i) id[i] = static_cast<uint8_t>(n >> (8 * i));
  id[8] = 0xf2;  // marks harness jobs; the inputs' own hellos may use any id
  id[9] = tag;
  return id;
}

std::vector<uint8_t> HelloFrame(const wire::JobIdBytes& id, uint32_t nranks, uint32_t rank) {
  wire::Hello h;
  h.job_id = id;
  h.nranks = nranks;
  h.rank = rank;
  return Frame(wire::EncodeHello(h));
}

// One client connection of an exchange.
struct Peer {
  int fd = -1;
  std::vector<uint8_t> out;  // what to send
  size_t sent = 0;
  bool write_open = true;
  std::vector<uint8_t> in;  // what the server sent
  bool eof = false;         // the server closed (or reset) the connection
};

// Sends every peer's bytes while draining what the server sends back, half-closes (once every
// byte is out and, when `quiet` is nonzero, the server has sent nothing for that long), and reads
// until the server closes every connection or `limit` passes.
void Exchange(std::vector<Peer>& peers, milliseconds quiet, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  uint8_t buf[65536];
  bool lingering = quiet.count() > 0;
  for (;;) {
    bool all_sent = true;
    bool all_eof = true;
    for (const Peer& p : peers) {
      all_sent = all_sent && (p.sent == p.out.size() || !p.write_open);
      all_eof = all_eof && p.eof;
    }
    if (all_eof) return;
    if (all_sent && !lingering) {
      for (Peer& p : peers) {
        if (p.write_open) ::shutdown(p.fd, SHUT_WR);
        p.write_open = false;
      }
    }
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return;
    if (all_sent && lingering) left = std::min<int64_t>(left, quiet.count());
    std::vector<pollfd> pfds;
    for (const Peer& p : peers) {
      short ev = p.eof ? 0 : POLLIN;
      if (p.write_open && p.sent < p.out.size()) ev |= POLLOUT;
      pfds.push_back(pollfd{p.eof ? -1 : p.fd, ev, 0});
    }
    const int r = ::poll(pfds.data(), pfds.size(), static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    FUZZ_CHECK(r >= 0, "poll: %s", std::strerror(errno));
    if (r == 0) {
      if (all_sent && lingering) {
        lingering = false;  // the server is quiet: now half-close
        continue;
      }
      return;
    }
    for (size_t i = 0; i < peers.size(); ++i) {
      Peer& p = peers[i];
      const short rev = pfds[i].revents;
      if (rev & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t n = ::recv(p.fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
          p.in.insert(p.in.end(), buf, buf + n);
        } else if (n == 0) {
          p.eof = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          p.eof = true;  // reset: the server dropped the connection
        }
      }
      if (p.write_open && (rev & POLLOUT)) {
        const ssize_t n = ::send(p.fd, p.out.data() + p.sent, p.out.size() - p.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          p.sent += static_cast<size_t>(n);
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          // The server stopped reading and closed; what it sent may still be readable.
          ::shutdown(p.fd, SHUT_WR);
          p.write_open = false;
        }
      }
    }
  }
}

// Parses the frames of `in`; returns the decoded metas (stops at the first malformed frame).
std::vector<wire::Message> ParseReplies(const std::vector<uint8_t>& in, bool* malformed) {
  std::vector<wire::Message> msgs;
  *malformed = false;
  size_t pos = 0;
  while (in.size() - pos >= transport::kFrameHeaderSize) {
    uint32_t magic = 0, meta_len = 0;
    uint64_t payload_len = 0;
    std::memcpy(&magic, in.data() + pos, 4);
    std::memcpy(&meta_len, in.data() + pos + 4, 4);
    std::memcpy(&payload_len, in.data() + pos + 8, 8);
    if (magic != transport::kFrameMagic || meta_len == 0 || meta_len > transport::kMaxMetaBytes) {
      *malformed = true;
      return msgs;
    }
    pos += transport::kFrameHeaderSize;
    if (in.size() - pos < meta_len) break;
    wire::Message m;
    if (!wire::Decode(std::span<const uint8_t>(in.data() + pos, meta_len), &m).ok()) {
      *malformed = true;
      return msgs;
    }
    msgs.push_back(m);
    pos += meta_len;
    if (in.size() - pos < payload_len) break;
    pos += payload_len;
  }
  return msgs;
}

// A fresh rank must still be welcomed.
void CheckAlive() {
  const int fd = Connect();
  const auto hello = HelloFrame(FreshJobId(0xa1), 1, 0);
  // Send the hello without half-closing (it fits any socket buffer), then read until one
  // complete Welcome frame is in.
  ssize_t sent;
  do {
    sent = ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  FUZZ_CHECK(sent == static_cast<ssize_t>(hello.size()), "liveness hello: send: %s", std::strerror(errno));
  std::vector<uint8_t> in;
  const auto deadline = Clock::now() + g_wait;
  uint8_t buf[256];
  for (;;) {
    bool malformed = false;
    const auto msgs = ParseReplies(in, &malformed);
    FUZZ_CHECK(!malformed, "liveness hello: malformed reply");
    if (!msgs.empty()) {
      FUZZ_CHECK(msgs[0].type == wire::MsgType::kWelcome, "liveness hello answered with type %u (%s)",
                 static_cast<unsigned>(msgs[0].type), msgs[0].error.text.c_str());
      break;
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    FUZZ_CHECK(left > 0, "the server did not welcome a fresh hello within %lld ms: it is stuck or dead",
               static_cast<long long>(g_wait.count()));
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    FUZZ_CHECK(n > 0, "the server closed the liveness connection: %s", n == 0 ? "end of stream" : std::strerror(errno));
    in.insert(in.end(), buf, buf + n);
  }
  ::close(fd);
}

// Every connection gone, every job retired, every chunk buffer back in the pool.
void CheckIdle() {
  const auto deadline = Clock::now() + g_wait;
  for (;;) {
    const server::ServerStats s = g_server->stats();
    if (s.connections == 0 && s.jobs_active == 0 && s.buffer_bytes_outstanding == 0) return;
    FUZZ_CHECK(Clock::now() < deadline,
               "the server is not idle %lld ms after every client left: %llu connections, %llu jobs, %llu buffer "
               "bytes",
               static_cast<long long>(g_wait.count()), static_cast<unsigned long long>(s.connections),
               static_cast<unsigned long long>(s.jobs_active),
               static_cast<unsigned long long>(s.buffer_bytes_outstanding));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace
}  // namespace optcast::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  optcast::fuzz::StartServer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace optcast;
  using namespace optcast::fuzz;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::span<const uint8_t> body(data + 1, size - 1);
  const uint32_t nranks = mode & 3u;
  const milliseconds quiet((mode & 16) ? 3 : 0);
  const bool all_ranks = nranks > 1 && (mode & 32);

  std::vector<Peer> peers;
  if (nranks == 0) {
    peers.resize(1);
    peers[0].out.assign(body.begin(), body.end());
  } else {
    const wire::JobIdBytes job = FreshJobId(0xb0);
    const uint32_t first = ((mode >> 2) & 3u) % nranks;
    peers.resize(all_ranks ? nranks : 1);
    for (size_t i = 0; i < peers.size(); ++i) {
      peers[i].out = HelloFrame(job, nranks, (first + static_cast<uint32_t>(i)) % nranks);
      Append(&peers[i].out, body);
    }
  }
  for (Peer& p : peers) p.fd = Connect();
  Exchange(peers, quiet, g_wait);
  for (Peer& p : peers) ::close(p.fd);

  for (const Peer& p : peers) {
    FUZZ_CHECK(p.eof, "the server kept a connection open %lld ms after the client's end of stream",
               static_cast<long long>(g_wait.count()));
    // Whatever the server said must be well-formed frames of server-to-client messages.
    bool malformed = false;
    const auto msgs = ParseReplies(p.in, &malformed);
    FUZZ_CHECK(!malformed, "the server sent a malformed frame");
    for (const auto& m : msgs) {
      FUZZ_CHECK(m.type == wire::MsgType::kWelcome || m.type == wire::MsgType::kError ||
                     m.type == wire::MsgType::kResult || m.type == wire::MsgType::kAck ||
                     m.type == wire::MsgType::kStallReport || m.type == wire::MsgType::kHeartbeat ||
                     m.type == wire::MsgType::kNotice || m.type == wire::MsgType::kAgreed ||
                     m.type == wire::MsgType::kEpoch,
                 "the server sent a client-to-server message type %u", static_cast<unsigned>(m.type));
    }
    // Replies are not guaranteed: the server treats end-of-stream as the rank leaving and drops
    // what it had queued for it. But what does come starts with the prelude's Welcome, or (for a
    // rank whose hello arrived after another rank's bytes failed the job) that failure.
    if (nranks != 0 && !msgs.empty()) {
      const bool late =
          msgs[0].type == wire::MsgType::kError && msgs[0].error.text.find("failed before rank") != std::string::npos;
      FUZZ_CHECK(msgs[0].type == wire::MsgType::kWelcome || late, "the prelude hello was answered with type %u (%s)",
                 static_cast<unsigned>(msgs[0].type), msgs[0].error.text.c_str());
    }
  }

  CheckAlive();
  CheckIdle();
  return 0;
}
