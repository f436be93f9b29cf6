// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The failover messages (Failover, Epoch, and the server-to-client Notice, Agreed, Heartbeat sent
// the wrong way) against a live server::Server (one per process, on 127.0.0.1, port 0, on its own
// thread), from every rank of a fresh job, one message at a time.
//
// Input: byte 0 chooses the job's ranks (2 or 3); then operations, each an opcode byte (bits 0-1:
// the rank, modulo the ranks; bits 2-4: the kind) and its operands:
//   0, 1: Failover report: epoch (& 3), server_index (& 7), dead_mask, first_unplanned,
//         n (& 3), n collectives needing a re-run (a byte each)
//   2:    Epoch: epoch (& 3), dead_mask, boundary
//   3, 4, 5: Heartbeat, Notice (dead_mask), Agreed (epoch, dead_mask, boundary): server-to-client
//         messages, which the server must refuse
//   6:    a raw meta block of a failover message type (14-18) and length (& 63) bytes
//   7:    a one-element allreduce chunk: coll_seq (& 7), epoch (& 3)
// After each operation the rank asks a stall query and reads until its answer (or the end of the
// connection), so the server handles the operations in input order.
//
// Checks: every reply is a well-formed server-to-client frame and every Error says why. A model of
// the agreement rules (docs/reliability.md, "Failover") predicts, for every rank, the Notice,
// Agreed and Epoch messages it must get, exactly, and which operations fail the job: an
// agreement only once every rank reported the same dead set at one epoch, from the first server
// left, with the lowest first-unstriped collective as its boundary and what ranks need below it
// to re-run. Every rank gets the same agreements. Then a fresh hello is welcomed and the server
// becomes idle (no connection, job or chunk buffer left).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "frames.h"
#include "live_server.h"
#include "server/server.h"
#include "wire/protocol.h"

namespace optcast::fuzz {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

server::Server* g_server = nullptr;
uint16_t g_port = 0;
uint64_t g_job_counter = 0;
milliseconds g_wait{5000};  // OPTCAST_FUZZ_WAIT_MS

void StartServer() {
  setenv("OPTCAST_LOG_LEVEL", "off", /*overwrite=*/0);
  if (const char* w = std::getenv("OPTCAST_FUZZ_WAIT_MS")) g_wait = milliseconds(std::atoi(w));
  server::ServerOptions o;
  o.listen = {"127.0.0.1", 0};
  o.job_timeout = milliseconds(2000);
  o.hello_timeout = milliseconds(2000);
  o.max_payload = 1u << 20;
  g_server = &LiveServer::Start(o);
  g_port = g_server->port();
}

// A blocking-free connection (libFuzzer's SIGALRM interrupts blocking calls: every wait polls).
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
      FUZZ_CHECK(Clock::now() < deadline, "the server did not accept a connection");
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, 50);
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

// One rank's connection: what it sent and the messages it got.
struct Rank {
  int fd = -1;
  bool eof = false;
  std::vector<uint8_t> in;  // bytes not yet parsed into messages
  std::vector<wire::Message> got;
};

// Moves every whole frame of `r.in` into `r.got`; checks each is a server-to-client message.
void Parse(Rank& r) {
  size_t pos = 0;
  while (r.in.size() - pos >= transport::kFrameHeaderSize) {
    uint32_t magic = 0, meta_len = 0;
    uint64_t payload_len = 0;
    std::memcpy(&magic, r.in.data() + pos, 4);
    std::memcpy(&meta_len, r.in.data() + pos + 4, 4);
    std::memcpy(&payload_len, r.in.data() + pos + 8, 8);
    FUZZ_CHECK(magic == transport::kFrameMagic && meta_len > 0 && meta_len <= transport::kMaxMetaBytes,
               "the server sent a malformed frame header");
    const size_t whole = transport::kFrameHeaderSize + meta_len + payload_len;
    if (r.in.size() - pos < whole) break;
    wire::Message m;
    const Status st =
        wire::Decode(std::span<const uint8_t>(r.in.data() + pos + transport::kFrameHeaderSize, meta_len), &m);
    FUZZ_CHECK(st.ok(), "the server sent a meta block that does not decode: %s", st.message().c_str());
    FUZZ_CHECK(m.type == wire::MsgType::kWelcome || m.type == wire::MsgType::kError ||
                   m.type == wire::MsgType::kResult || m.type == wire::MsgType::kAck ||
                   m.type == wire::MsgType::kStallReport || m.type == wire::MsgType::kHeartbeat ||
                   m.type == wire::MsgType::kNotice || m.type == wire::MsgType::kAgreed ||
                   m.type == wire::MsgType::kEpoch,
               "the server sent a client-to-server message type %u", static_cast<unsigned>(m.type));
    FUZZ_CHECK(m.type != wire::MsgType::kError || !m.error.text.empty(), "the server sent an error without a reason");
    r.got.push_back(std::move(m));
    pos += whole;
  }
  r.in.erase(r.in.begin(), r.in.begin() + static_cast<std::ptrdiff_t>(pos));
}

// Reads what has arrived on `r` (waiting up to `wait_ms` for the first byte).
void Drain(Rank& r, int wait_ms) {
  if (r.eof) return;
  uint8_t buf[16384];
  for (;;) {
    pollfd p{r.fd, POLLIN, 0};
    const int n = ::poll(&p, 1, wait_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const ssize_t got = ::recv(r.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (got > 0) {
      r.in.insert(r.in.end(), buf, buf + got);
      wait_ms = 0;
      continue;
    }
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    r.eof = true;  // closed or reset
    break;
  }
  Parse(r);
}

void Send(Rank& r, const std::vector<uint8_t>& bytes) {
  size_t sent = 0;
  const auto deadline = Clock::now() + g_wait;
  while (sent < bytes.size() && !r.eof) {
    const ssize_t n = ::send(r.fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      Drain(r, 0);
      r.eof = true;  // the server closed: what it said is in r.got
      return;
    }
    FUZZ_CHECK(Clock::now() < deadline, "the server read nothing for %lld ms", static_cast<long long>(g_wait.count()));
    Drain(r, 1);
  }
}

// Asks a stall query and reads until its answer or the end of the connection: every message the
// rank sent before has been handled.
void Barrier(Rank& r, uint64_t tag) {
  if (r.eof) return;
  Send(r, Frame(wire::EncodeStallQuery(tag)));
  const auto deadline = Clock::now() + g_wait;
  size_t seen = 0;
  for (;;) {
    for (; seen < r.got.size(); ++seen) {
      if (r.got[seen].type == wire::MsgType::kStallReport && r.got[seen].stall_report.coll_seq == tag) {
        r.got.erase(r.got.begin() + static_cast<std::ptrdiff_t>(seen));
        return;
      }
    }
    if (r.eof) return;
    FUZZ_CHECK(Clock::now() < deadline, "the server neither answered a stall query nor closed within %lld ms",
               static_cast<long long>(g_wait.count()));
    Drain(r, 20);
  }
}

// The failover messages a rank got, in order, as comparable text.
std::string Describe(const wire::Message& m) {
  std::string s;
  switch (m.type) {
    case wire::MsgType::kNotice: return "notice " + std::to_string(m.notice_mask);
    case wire::MsgType::kEpoch:
      return "epoch " + std::to_string(m.epoch.epoch) + " " + std::to_string(m.epoch.dead_mask) + " " +
             std::to_string(m.epoch.boundary);
    case wire::MsgType::kAgreed:
      s = "agreed " + std::to_string(m.agreed.epoch) + " " + std::to_string(m.agreed.dead_mask) + " " +
          std::to_string(m.agreed.boundary) + " [";
      for (uint64_t seq : m.agreed.recover) s += std::to_string(seq) + ",";
      return s + "]";
    default: return "";
  }
}

// The agreement rules, restated from docs/reliability.md for one job at one server.
struct Model {
  uint32_t nranks = 0;
  bool valid = true;  // false once a raw message may have changed the job's state unseen
  bool failed = false;
  // Epochs applied (Epoch messages).
  uint32_t epoch = 0;
  uint64_t dead = 0;
  std::vector<uint64_t> boundaries{0};
  // The round of reports being collected.
  uint32_t round_epoch = 0;
  uint32_t agreed_through = 0;
  std::string last_agreed;         // the agreement last worked out here, announced or not
  uint32_t last_agreed_index = 0;  // where the ranks of that agreement placed this server
  bool resent = false;             // sent it to one rank alone (the others hear it from its announcer)
  std::map<uint32_t, wire::FailoverReport> reports;
  std::map<uint32_t, uint64_t> noticed;
  std::vector<std::vector<std::string>> expect;  // per rank: failover messages due, in order
};

enum class Outcome { kNothing, kRankRefused, kJobFails, kEither };

Outcome ApplyReport(Model& m, uint32_t rank, const wire::FailoverReport& r) {
  if (r.dead_mask == 0) return Outcome::kRankRefused;                     // reports no death
  if ((r.dead_mask >> r.server_index) & 1) return Outcome::kRankRefused;  // this server dead to itself
  if (r.epoch < m.round_epoch || r.epoch < m.agreed_through) {
    // A rank that places this server elsewhere than the ranks of the last agreement did fails the
    // job (its list is not theirs).
    if (!m.last_agreed.empty() && r.server_index != m.last_agreed_index) return Outcome::kJobFails;
    // A rank behind the last agreement that lists every server before this one as dead gets it
    // again from here: its announcer may have died before it arrived.
    const uint64_t before = (uint64_t{1} << r.server_index) - 1;
    if (r.epoch + 1 == m.agreed_through && (r.dead_mask & before) == before && !m.last_agreed.empty()) {
      m.expect[rank].push_back(m.last_agreed);
      m.resent = true;
    }
    return Outcome::kNothing;
  }
  if (r.epoch > m.round_epoch) {
    m.round_epoch = r.epoch;
    m.reports.clear();
    m.noticed.clear();
  }
  m.reports[rank] = r;
  uint64_t all_dead = 0;
  for (const auto& [k, rep] : m.reports) all_dead |= rep.dead_mask;
  for (uint32_t k = 0; k < m.nranks; ++k) {
    auto it = m.reports.find(k);
    if (it != m.reports.end() && it->second.dead_mask == all_dead) continue;
    if (m.noticed[k] == all_dead) continue;
    m.noticed[k] = all_dead;
    m.expect[k].push_back("notice " + std::to_string(all_dead));
  }
  if (m.reports.size() < m.nranks) return Outcome::kNothing;
  bool same_dead = true, same_index = true;
  for (const auto& [k, rep] : m.reports) {
    same_dead = same_dead && rep.dead_mask == all_dead;
    same_index = same_index && rep.server_index == r.server_index;
  }
  if (!same_dead) return same_index ? Outcome::kNothing : Outcome::kEither;
  if (!same_index) return Outcome::kJobFails;  // ranks list this server at different places
  m.agreed_through = m.round_epoch + 1;
  uint64_t boundary = UINT64_MAX;
  std::set<uint64_t> needing;
  for (const auto& [k, rep] : m.reports) {
    boundary = std::min(boundary, rep.first_unplanned);
    needing.insert(rep.needing.begin(), rep.needing.end());
  }
  std::string s = "agreed " + std::to_string(m.agreed_through) + " " + std::to_string(all_dead) + " " +
                  std::to_string(boundary) + " [";
  for (uint64_t seq : needing) {
    if (seq < boundary) s += std::to_string(seq) + ",";
  }
  s += "]";
  m.last_agreed = s;
  m.last_agreed_index = r.server_index;
  const uint64_t below = (uint64_t{1} << r.server_index) - 1;
  if ((all_dead & below) != below) return Outcome::kNothing;  // not the first server left: silent
  for (auto& e : m.expect) e.push_back(s);
  return Outcome::kNothing;
}

Outcome ApplyEpoch(Model& m, const wire::EpochChange& e) {
  if (e.epoch <= m.epoch) return m.boundaries[e.epoch] == e.boundary ? Outcome::kNothing : Outcome::kJobFails;
  if (e.epoch != m.epoch + 1 || (e.dead_mask & m.dead) != m.dead) return Outcome::kRankRefused;
  m.epoch = e.epoch;
  m.dead = e.dead_mask;
  m.boundaries.push_back(e.boundary);
  const std::string s =
      "epoch " + std::to_string(e.epoch) + " " + std::to_string(e.dead_mask) + " " + std::to_string(e.boundary);
  for (auto& x : m.expect) x.push_back(s);
  return Outcome::kNothing;
}

// Reads operands from the input; zeros past its end.
struct Reader {
  std::span<const uint8_t> data;
  size_t pos = 0;
  bool more() const { return pos < data.size(); }
  uint8_t next() { return pos < data.size() ? data[pos++] : 0; }
};

bool GotError(const Rank& r) {
  return std::any_of(r.got.begin(), r.got.end(),
                     [](const wire::Message& m) { return m.type == wire::MsgType::kError; });
}

std::vector<std::string> FailoverMessages(const Rank& r) {
  std::vector<std::string> out;
  for (const wire::Message& m : r.got) {
    const std::string d = Describe(m);
    if (!d.empty()) out.push_back(d);
  }
  return out;
}

void CheckAlive() {
  Rank r;
  r.fd = Connect();
  wire::Hello h;
  const uint64_t n = ++g_job_counter;
  for (int i = 0; i < 8; ++i) h.job_id[i] = static_cast<uint8_t>(n >> (8 * i));
  h.job_id[8] = 0xf3;
  h.job_id[9] = 0xa1;
  h.nranks = 1;
  Send(r, Frame(wire::EncodeHello(h)));
  const auto deadline = Clock::now() + g_wait;
  while (r.got.empty()) {
    FUZZ_CHECK(!r.eof, "the server closed the liveness connection");
    FUZZ_CHECK(Clock::now() < deadline, "the server did not welcome a fresh hello: it is stuck or dead");
    Drain(r, 20);
  }
  FUZZ_CHECK(r.got[0].type == wire::MsgType::kWelcome, "a fresh hello was answered with type %u",
             static_cast<unsigned>(r.got[0].type));
  ::close(r.fd);
}

void CheckIdle() {
  const auto deadline = Clock::now() + g_wait;
  for (;;) {
    const server::ServerStats s = g_server->stats();
    if (s.connections == 0 && s.jobs_active == 0 && s.buffer_bytes_outstanding == 0) return;
    FUZZ_CHECK(Clock::now() < deadline,
               "the server is not idle after every client left: %llu connections, %llu jobs, "
               "%llu buffer bytes",
               static_cast<unsigned long long>(s.connections), static_cast<unsigned long long>(s.jobs_active),
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
  Model m;
  m.nranks = 2 + (data[0] & 1u);
  m.expect.resize(m.nranks);
  std::vector<Rank> ranks(m.nranks);
  wire::Hello hello;
  const uint64_t job = ++g_job_counter;
  for (int i = 0; i < 8; ++i) hello.job_id[i] = static_cast<uint8_t>(job >> (8 * i));
  hello.job_id[8] = 0xf3;
  hello.nranks = m.nranks;
  for (uint32_t k = 0; k < m.nranks; ++k) {
    ranks[k].fd = Connect();
    hello.rank = k;
    Send(ranks[k], Frame(wire::EncodeHello(hello)));
  }
  for (uint32_t k = 0; k < m.nranks; ++k) {
    Barrier(ranks[k], 1);
    FUZZ_CHECK(!ranks[k].got.empty() && ranks[k].got[0].type == wire::MsgType::kWelcome, "rank %u was not welcomed", k);
    ranks[k].got.erase(ranks[k].got.begin());
  }

  Reader in{std::span<const uint8_t>(data + 1, size - 1)};
  uint64_t tag = 2;
  for (int op = 0; in.more() && op < 32 && !m.failed; ++op) {
    const uint8_t code = in.next();
    const uint32_t k = (code & 3u) % m.nranks;
    Rank& r = ranks[k];
    Outcome expect = Outcome::kNothing;
    std::vector<uint8_t> meta;
    std::vector<uint8_t> payload;
    switch ((code >> 2) & 7u) {
      case 0:
      case 1: {
        wire::FailoverReport rep;
        rep.epoch = in.next() & 3u;
        rep.server_index = in.next() & 7u;
        rep.dead_mask = in.next();
        rep.first_unplanned = in.next();
        const int n = in.next() & 3;
        for (int i = 0; i < n; ++i) rep.needing.push_back(in.next());
        meta = wire::EncodeFailover(rep);
        expect = ApplyReport(m, k, rep);
        break;
      }
      case 2: {
        wire::EpochChange e;
        e.epoch = in.next() & 3u;
        e.dead_mask = in.next();
        e.boundary = in.next();
        meta = wire::EncodeEpoch(e);
        expect = ApplyEpoch(m, e);
        break;
      }
      case 3:
        meta = wire::EncodeHeartbeat();
        expect = Outcome::kRankRefused;
        break;
      case 4:
        meta = wire::EncodeNotice(in.next());
        expect = Outcome::kRankRefused;
        break;
      case 5: {
        wire::FailoverAgreed a;
        a.epoch = in.next();
        a.dead_mask = in.next();
        a.boundary = in.next();
        meta = wire::EncodeAgreed(a);
        expect = Outcome::kRankRefused;
        break;
      }
      case 6: {
        const uint16_t type = static_cast<uint16_t>(14 + in.next() % 5);
        meta = {static_cast<uint8_t>(wire::kProtocolVersion), 0, static_cast<uint8_t>(type), 0};
        const int n = in.next() & 63;
        for (int i = 0; i < n; ++i) meta.push_back(in.next());
        m.valid = false;  // whatever it decodes to, the model does not follow
        expect = Outcome::kEither;
        break;
      }
      case 7: {
        wire::Chunk c;
        c.desc.coll_seq = 1 + (in.next() & 7u);
        c.desc.coll = CollType::kAllReduce;
        c.desc.dtype = DataType::kInt32;
        c.desc.op = RedOp::kSum;
        c.desc.count = 1;
        c.desc.server_elems = 1;
        c.desc.epoch = in.next() & 3u;
        c.ref.count = 1;
        meta = wire::EncodeChunk(c);
        payload.assign(4, static_cast<uint8_t>(k + 1));
        // Ahead of the job's epoch: refused; behind it and striped again: dropped; a rank
        // sending one collective twice or ranks disagreeing on its epoch: refused or failed.
        expect = Outcome::kEither;
        break;
      }
    }
    Send(r, Frame(meta, payload));
    Barrier(r, tag++);
    for (Rank& other : ranks) Drain(other, 0);
    const bool refused = r.eof || GotError(r);
    // After a raw message the model no longer knows the job's state: it predicts nothing.
    if (!m.valid) expect = Outcome::kEither;
    switch (expect) {
      case Outcome::kNothing:
        FUZZ_CHECK(!refused, "operation %d (kind %u) was refused, but the rules accept it", op, (code >> 2) & 7u);
        break;
      case Outcome::kRankRefused:
        FUZZ_CHECK(GotError(r) || r.eof, "operation %d (kind %u) should have been refused with an error", op,
                   (code >> 2) & 7u);
        break;
      case Outcome::kJobFails:
        FUZZ_CHECK(refused, "operation %d (kind %u) should have failed the job", op, (code >> 2) & 7u);
        break;
      case Outcome::kEither: break;
    }
    for (const Rank& other : ranks) m.failed = m.failed || other.eof || GotError(other);
  }

  // Every rank's replies are in: a last stall query on each open connection.
  for (Rank& r : ranks) Barrier(r, tag++);
  std::vector<std::vector<std::string>> got;
  for (Rank& r : ranks) got.push_back(FailoverMessages(r));
  for (uint32_t k = 0; k < m.nranks; ++k) {
    if (m.valid) {
      // A job that failed may drop what it queued for a rank; up to that, exactly what the rules say.
      const bool whole = !m.failed;
      const auto& e = m.expect[k];
      FUZZ_CHECK(got[k].size() <= e.size() && (!whole || got[k].size() == e.size()) &&
                     std::equal(got[k].begin(), got[k].end(), e.begin()),
                 "rank %u got %zu failover message(s) (first: %s), the rules give %zu (first: %s)", k, got[k].size(),
                 got[k].empty() ? "-" : got[k][0].c_str(), e.size(), e.empty() ? "-" : e[0].c_str());
    }
    // Whatever happened, every rank hears the same agreements (a prefix where the job failed).
    // A rank that reported late may hear the last one again (it ignores one it applied): each
    // counts once.
    std::vector<std::string> a, b;
    for (const auto& s : got[k]) {
      if (s.rfind("agreed", 0) == 0 && std::find(a.begin(), a.end(), s) == a.end()) a.push_back(s);
    }
    for (const auto& s : got[0]) {
      if (s.rfind("agreed", 0) == 0 && std::find(b.begin(), b.end(), s) == b.end()) b.push_back(s);
    }
    const size_t n = std::min(a.size(), b.size());
    FUZZ_CHECK(std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()),
               "ranks 0 and %u heard different agreements", k);
    FUZZ_CHECK(m.failed || m.resent || a.size() == b.size(), "ranks 0 and %u heard %zu and %zu agreements", k, b.size(),
               a.size());
  }
  for (Rank& r : ranks) ::close(r.fd);
  CheckAlive();
  CheckIdle();
  return 0;
}
