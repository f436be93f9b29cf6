// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "nccl/net_tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/env.h"
#include "common/little_endian.h"
#include "nccl/interfaces.h"
#include "nccl/logging.h"
#include "transport/factory.h"
#include "transport/posix/socket.h"

namespace optcast::nccl::net {

namespace {

using transport::Connection;
using transport::posix::Socket;

constexpr uint64_t kHandleMagic = 0x314854454e43504f;   // "OPCNETH1"
constexpr uint64_t kHelloMagic = 0x314f4c4c4548504f;    // "OPHELLO1"
constexpr uint64_t kRequestMagic = 0x3151455254454e4f;  // "ONETREQ1"
// Requests in flight per comm. NCCL keeps at most NCCL_STEPS (8) per connection; beyond this a
// call answers "not now" (null request) rather than failing.
constexpr size_t kMaxInflight = 4 * kNetMaxRequests;
constexpr uint64_t kMaxPayload = uint64_t{1} << 40;
constexpr auto kRetryDelay = std::chrono::milliseconds(10);
constexpr auto kHelloTimeout = std::chrono::seconds(60);

// ---- little-endian encoding of our two message kinds ----

enum MsgType : uint8_t { kClearToSend = 1, kData = 2 };
// Clear to send: [type, n, 0 x6][seq u64] then n x [tag i64][size u64].
constexpr size_t kCtsHeader = 16;
constexpr size_t kCtsEntry = 16;
// Data: [type, index, 0 x6][seq u64][size u64], then `size` payload bytes.
constexpr size_t kDataMeta = 24;

// ---- connection handshake ----

struct PendingConnect;

// What listen() writes into NCCL's 128-byte handle and connect() reads from it.
struct NetHandle {
  uint64_t magic;
  uint8_t nonce[16];  // the listener's; a connection must present it
  union {
    sockaddr sa;
    sockaddr_in in4;
    sockaddr_in6 in6;
  } addr;
  uint32_t addr_len;
  uint32_t reserved;
  // Connect progress across calls, kept in the connector's copy of the handle like NCCL's own
  // socket transport does; listen() writes null.
  PendingConnect* pending;
};
static_assert(sizeof(NetHandle) <= kNetHandleMaxSize);

struct Hello {
  uint8_t bytes[24];  // magic u64, nonce[16]
};

Hello MakeHello(const uint8_t* nonce) {
  Hello h;
  PutU64(h.bytes, kHelloMagic);
  std::memcpy(h.bytes + 8, nonce, 16);
  return h;
}

void RandomNonce(uint8_t* out) {
  if (getrandom(out, 16, 0) != 16) {
    const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    PutU64(out, t);
    PutU64(out + 8, reinterpret_cast<uintptr_t>(out) ^ (t << 17));
  }
}

int ConnectTimeoutMs() {
  int64_t ms = 0;
  if (!GetEnvInt("OPTCAST_CONNECT_TIMEOUT_MS", 30000, &ms).ok() || ms <= 0) ms = 30000;
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

struct PendingConnect {
  Socket sock;
  bool connecting = false;  // a connect() is in progress on `sock`
  bool connected = false;
  Hello hello{};
  size_t hello_sent = 0;
  Deadline deadline{};
  Clock::time_point next_attempt{};
  std::string peer;
  std::string last_error = "no attempt yet";
};

struct PendingAccept {
  Socket sock;
  std::string peer;
  Hello hello{};
  size_t received = 0;
  Deadline deadline{};
};

struct ListenComm {
  Socket sock;
  uint8_t nonce[16];
  int dev;
  std::deque<PendingAccept> pending;
};

// ---- requests and comms ----

class CommBase;

struct Request {
  enum class Kind { kSend, kRecv };
  uint64_t magic = kRequestMagic;
  Kind kind;
  CommBase* comm;
  bool done = false;
  int n = 1;
  std::array<size_t, kMaxRecvs> bytes{};  // bytes moved per buffer
  // Receives only.
  uint64_t seq = 0;
  int outstanding = 0;
  std::array<uint8_t*, kMaxRecvs> data{};
  std::array<size_t, kMaxRecvs> capacity{};
  std::array<bool, kMaxRecvs> landed{};
};

ncclResult_t ResultFor(const Status& st) { return st.code() == Code::kUnavailable ? ncclRemoteError : ncclSystemError; }

// A connected TCP stream plus the requests that use it. One thread at a time (NCCL's proxy
// thread); the mutex keeps test() from another thread safe too.
class CommBase : public transport::MessageHandler {
 public:
  CommBase(Socket sock, std::string peer)
      : conn_(transport::WrapStreamSocket(std::move(sock), kMaxPayload, std::move(peer))) {}
  ~CommBase() override {
    // Drain what the peer sent so that close() ends with FIN, not RST: a reset could discard
    // data the peer has not read yet.
    uint8_t scratch[4096];
    while (::recv(conn_->fd(), scratch, sizeof(scratch), MSG_DONTWAIT) > 0) {
    }
  }

  std::mutex mu;

  // Writes what is queued and reads what has arrived; a failure breaks the comm for good.
  void Progress() {
    if (!broken_.ok()) return;
    Status st = conn_->Flush();
    if (st.ok()) st = conn_->ReadAvailable(*this);
    if (st.ok() && conn_->HasPendingWrites()) st = conn_->Flush();
    if (!st.ok()) {
      broken_ = st;
      OPTCAST_NCCL_WARN("connection with {} failed: {}", conn_->peer(), st.message());
    }
  }

  const Status& broken() const { return broken_; }
  bool Full() const { return requests_.size() >= kMaxInflight; }

  Request* NewRequest(Request::Kind kind) {
    auto r = std::make_unique<Request>();
    r->kind = kind;
    r->comm = this;
    Request* raw = r.get();
    requests_.emplace(raw, std::move(r));
    return raw;
  }
  void FreeRequest(Request* r) {
    r->magic = 0;
    requests_.erase(r);
  }

 protected:
  std::unique_ptr<transport::Connection> conn_;
  Status broken_;

 private:
  std::unordered_map<Request*, std::unique_ptr<Request>> requests_;
};

class SendComm final : public CommBase {
 public:
  using CommBase::CommBase;

  ncclResult_t Isend(void* data, size_t size, int tag, void** request) {
    *request = nullptr;
    Progress();
    if (!broken_.ok()) return ResultFor(broken_);
    if (Full() || cts_.empty()) return ncclSuccess;
    // Like NCCL's IB transport, only the oldest clear-to-send can match; a tag that is not in it
    // waits until the receiver's earlier buffers are all matched.
    ClearToSend& cts = cts_.front();
    int index = -1;
    for (int i = 0; i < cts.n; ++i) {
      if (!cts.matched[i] && cts.tags[i] == tag) {
        index = i;
        break;
      }
    }
    if (index < 0) return ncclSuccess;
    if (size > cts.sizes[index]) {
      OPTCAST_NCCL_WARN("isend of {} bytes with tag {} to {}, but the receiver posted only {} bytes", size, tag,
                        conn_->peer(), cts.sizes[index]);
      return ncclInvalidUsage;
    }
    cts.matched[index] = true;
    const uint64_t seq = cts.seq;
    if (++cts.nmatched == cts.n) cts_.pop_front();

    Request* r = NewRequest(Request::Kind::kSend);
    r->bytes[0] = size;
    uint8_t meta[kDataMeta] = {kData, static_cast<uint8_t>(index)};
    PutU64(meta + 8, seq);
    PutU64(meta + 16, size);
    transport::OutMessage msg = transport::MakeOutMessage(meta, data, size);
    msg.on_done = [r] { r->done = true; };
    conn_->Send(std::move(msg));
    Progress();
    *request = r;
    return ncclSuccess;
  }

  Status OnMessageMeta(Connection&, std::span<const uint8_t> meta, uint64_t payload_len, uint8_t**) override {
    if (meta.size() < kCtsHeader || meta[0] != kClearToSend || payload_len != 0) {
      return ProtocolError("unexpected message from the receiver " + conn_->peer());
    }
    ClearToSend cts;
    cts.n = meta[1];
    cts.seq = GetU64(meta.data() + 8);
    if (cts.n < 1 || cts.n > kMaxRecvs || meta.size() != kCtsHeader + kCtsEntry * cts.n) {
      return ProtocolError("malformed clear-to-send from " + conn_->peer());
    }
    for (int i = 0; i < cts.n; ++i) {
      const uint8_t* e = meta.data() + kCtsHeader + kCtsEntry * i;
      cts.tags[i] = static_cast<int>(static_cast<int64_t>(GetU64(e)));
      cts.sizes[i] = GetU64(e + 8);
    }
    cts_.push_back(cts);
    return Status::Ok();
  }
  Status OnMessageComplete(Connection&) override { return Status::Ok(); }

 private:
  struct ClearToSend {
    uint64_t seq = 0;
    int n = 0;
    int nmatched = 0;
    std::array<int, kMaxRecvs> tags{};
    std::array<size_t, kMaxRecvs> sizes{};
    std::array<bool, kMaxRecvs> matched{};
  };
  std::deque<ClearToSend> cts_;
};

class RecvComm final : public CommBase {
 public:
  using CommBase::CommBase;

  ncclResult_t Irecv(int n, void** data, const size_t* sizes, const int* tags, void** request) {
    *request = nullptr;  // NCCL may have stored NCCL_NET_OPTIONAL_RECV_COMPLETION here; we always complete
    if (n < 1 || n > kMaxRecvs) {
      OPTCAST_NCCL_WARN("irecv of {} buffers; at most {} are supported", n, kMaxRecvs);
      return ncclInvalidArgument;
    }
    Progress();
    if (!broken_.ok()) return ResultFor(broken_);
    if (Full()) return ncclSuccess;
    Request* r = NewRequest(Request::Kind::kRecv);
    r->n = n;
    r->outstanding = n;
    r->seq = next_seq_++;
    std::vector<uint8_t> meta(kCtsHeader + kCtsEntry * n, 0);
    meta[0] = kClearToSend;
    meta[1] = static_cast<uint8_t>(n);
    PutU64(meta.data() + 8, r->seq);
    for (int i = 0; i < n; ++i) {
      r->data[i] = static_cast<uint8_t*>(data[i]);
      r->capacity[i] = sizes[i];
      PutU64(meta.data() + kCtsHeader + kCtsEntry * i, static_cast<uint64_t>(static_cast<int64_t>(tags[i])));
      PutU64(meta.data() + kCtsHeader + kCtsEntry * i + 8, sizes[i]);
    }
    posted_.emplace(r->seq, r);
    conn_->Send(transport::MakeOutMessage(meta, nullptr, 0));
    Progress();
    *request = r;
    return ncclSuccess;
  }

  Status OnMessageMeta(Connection&, std::span<const uint8_t> meta, uint64_t payload_len,
                       uint8_t** payload_dst) override {
    if (meta.size() != kDataMeta || meta[0] != kData) {
      return ProtocolError("unexpected message from the sender " + conn_->peer());
    }
    const int index = meta[1];
    const uint64_t seq = GetU64(meta.data() + 8);
    const uint64_t size = GetU64(meta.data() + 16);
    auto it = posted_.find(seq);
    if (it == posted_.end() || index >= it->second->n || it->second->landed[index] || size != payload_len ||
        size > it->second->capacity[index]) {
      return ProtocolError("data from " + conn_->peer() + " does not match any posted receive");
    }
    landing_ = it->second;
    landing_index_ = index;
    landing_->bytes[index] = size;
    *payload_dst = landing_->data[index];
    return Status::Ok();
  }

  Status OnMessageComplete(Connection&) override {
    Request* r = landing_;
    landing_ = nullptr;
    if (r == nullptr) return Status::Ok();
    r->landed[landing_index_] = true;
    if (--r->outstanding == 0) {
      r->done = true;
      posted_.erase(r->seq);
    }
    return Status::Ok();
  }

 private:
  uint64_t next_seq_ = 1;
  std::map<uint64_t, Request*> posted_;
  Request* landing_ = nullptr;
  int landing_index_ = 0;
};

// ---- connect helpers ----

bool Retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == EAGAIN || err == EINTR;
}

// Starts (or restarts) a non-blocking connect. False on an error that retrying will not fix.
bool StartConnect(PendingConnect* p, const NetHandle* h) {
  p->sock = Socket(::socket(h->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!p->sock.valid()) {
    p->last_error = std::string("socket(): ") + std::strerror(errno);
    return false;
  }
  const int rc = ::connect(p->sock.fd(), &h->addr.sa, h->addr_len);
  if (rc == 0) {
    p->connected = true;
    return true;
  }
  if (errno == EINPROGRESS) {
    p->connecting = true;
    return true;
  }
  p->last_error = std::strerror(errno);
  p->sock.Close();
  p->next_attempt = Clock::now() + kRetryDelay;
  return Retryable(errno);
}

std::string PeerText(const NetHandle* h) {
  char host[64] = "?";
  uint16_t port = 0;
  if (h->addr.sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &h->addr.in4.sin_addr, host, sizeof(host));
    port = ntohs(h->addr.in4.sin_port);
  } else if (h->addr.sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &h->addr.in6.sin6_addr, host, sizeof(host));
    port = ntohs(h->addr.in6.sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

// One step of a connect; true once the socket is connected and the hello is written.
ncclResult_t AdvanceConnect(PendingConnect* p, const NetHandle* h, bool* ready) {
  *ready = false;
  if (!p->connected && !p->connecting) {
    if (Clock::now() < p->next_attempt) return ncclSuccess;
    if (!StartConnect(p, h)) {
      OPTCAST_NCCL_WARN("cannot connect to {}: {}", p->peer, p->last_error);
      return ncclSystemError;
    }
  }
  if (p->connecting) {
    pollfd pfd{p->sock.fd(), POLLOUT, 0};
    if (::poll(&pfd, 1, 0) <= 0) return ncclSuccess;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(p->sock.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    p->connecting = false;
    if (err != 0) {
      p->last_error = std::strerror(err);
      p->sock.Close();
      p->next_attempt = Clock::now() + kRetryDelay;
      if (!Retryable(err)) {
        OPTCAST_NCCL_WARN("cannot connect to {}: {}", p->peer, p->last_error);
        return ncclSystemError;
      }
      return ncclSuccess;
    }
    p->connected = true;
  }
  while (p->hello_sent < sizeof(p->hello.bytes)) {
    const ssize_t n = ::send(p->sock.fd(), p->hello.bytes + p->hello_sent, sizeof(p->hello.bytes) - p->hello_sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p->hello_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return ncclSuccess;
    OPTCAST_NCCL_WARN("connection to {} failed during the handshake: {}", p->peer, std::strerror(errno));
    return ncclRemoteError;
  }
  *ready = true;
  return ncclSuccess;
}

}  // namespace

ncclResult_t Init() {
  (void)nccl::Devices();
  return ncclSuccess;
}

ncclResult_t Devices(int* ndev) {
  *ndev = static_cast<int>(nccl::Devices().size());
  return ncclSuccess;
}

ncclResult_t Listen(int dev, void* handle, void** listen_comm) {
  *listen_comm = nullptr;
  const auto& devices = nccl::Devices();
  if (dev < 0 || dev >= static_cast<int>(devices.size())) {
    OPTCAST_NCCL_WARN("listen on device {}, but there are {} devices", dev, devices.size());
    return ncclInvalidArgument;
  }
  const NetInterface& itf = devices[dev];
  auto l = std::make_unique<ListenComm>();
  l->dev = dev;
  Status st = transport::posix::Listen(transport::Endpoint{itf.address, 0}, &l->sock);
  if (st.ok()) st = transport::posix::SetNonBlocking(l->sock.fd(), true);
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  static_assert(sizeof(NetHandle::addr) >= sizeof(sockaddr_in6));
  if (st.ok() && getsockname(l->sock.fd(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    st = InternalError(std::string("getsockname: ") + std::strerror(errno));
  }
  if (st.ok() && bound_len > sizeof(NetHandle::addr)) st = InternalError("unexpected address size");
  if (!st.ok()) {
    OPTCAST_NCCL_WARN("cannot listen on {} ({}): {}", itf.name, itf.address, st.message());
    return ncclSystemError;
  }
  RandomNonce(l->nonce);
  auto* h = static_cast<NetHandle*>(handle);
  std::memset(handle, 0, kNetHandleMaxSize);
  h->magic = kHandleMagic;
  std::memcpy(h->nonce, l->nonce, sizeof(h->nonce));
  std::memcpy(&h->addr, &bound, bound_len);
  h->addr_len = bound_len;
  h->pending = nullptr;
  *listen_comm = l.release();
  return ncclSuccess;
}

ncclResult_t Connect(int dev, void* handle, void** send_comm) {
  *send_comm = nullptr;
  auto* h = static_cast<NetHandle*>(handle);
  if (h->magic != kHandleMagic) {
    OPTCAST_NCCL_WARN("connect with a handle that is not an Optcast net handle; do all ranks load the same plugin?");
    return ncclInvalidArgument;
  }
  PendingConnect* p = h->pending;
  if (p == nullptr) {
    p = new PendingConnect;
    p->deadline = Deadline::After(std::chrono::milliseconds(ConnectTimeoutMs()));
    p->hello = MakeHello(h->nonce);
    p->peer = PeerText(h);
    h->pending = p;
  }
  bool ready = false;
  ncclResult_t rc = AdvanceConnect(p, h, &ready);
  if (rc == ncclSuccess && !ready && p->deadline.Expired()) {
    OPTCAST_NCCL_WARN("cannot connect to {} within OPTCAST_CONNECT_TIMEOUT_MS ({} ms): {}", p->peer, ConnectTimeoutMs(),
                      p->last_error);
    rc = ncclSystemError;
  }
  if (rc != ncclSuccess || ready) {
    std::unique_ptr<PendingConnect> owned(p);
    h->pending = nullptr;
    if (rc != ncclSuccess) return rc;
    Status st = transport::posix::ConfigureDataSocket(owned->sock.fd(), true);
    if (!st.ok()) {
      OPTCAST_NCCL_WARN("connection to {}: {}", owned->peer, st.message());
      return ncclSystemError;
    }
    *send_comm = new SendComm(std::move(owned->sock), owned->peer);
  }
  return ncclSuccess;
}

ncclResult_t Accept(void* listen_comm, void** recv_comm) {
  *recv_comm = nullptr;
  auto* l = static_cast<ListenComm*>(listen_comm);
  for (;;) {
    PendingAccept pa;
    if (!transport::posix::Accept(l->sock, &pa.sock, &pa.peer).ok()) break;
    if (!transport::posix::SetNonBlocking(pa.sock.fd(), true).ok()) continue;
    pa.deadline = Deadline::After(kHelloTimeout);
    l->pending.push_back(std::move(pa));
  }
  for (auto it = l->pending.begin(); it != l->pending.end();) {
    PendingAccept& pa = *it;
    bool drop = false;
    while (pa.received < sizeof(pa.hello.bytes)) {
      const ssize_t n =
          ::recv(pa.sock.fd(), pa.hello.bytes + pa.received, sizeof(pa.hello.bytes) - pa.received, MSG_DONTWAIT);
      if (n > 0) {
        pa.received += static_cast<size_t>(n);
        continue;
      }
      drop = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      break;
    }
    if (!drop && pa.received == sizeof(pa.hello.bytes)) {
      if (GetU64(pa.hello.bytes) == kHelloMagic && std::memcmp(pa.hello.bytes + 8, l->nonce, 16) == 0) {
        Status st = transport::posix::ConfigureDataSocket(pa.sock.fd(), true);
        if (!st.ok()) {
          OPTCAST_NCCL_WARN("connection from {}: {}", pa.peer, st.message());
          return ncclSystemError;
        }
        *recv_comm = new RecvComm(std::move(pa.sock), pa.peer);
        l->pending.erase(it);
        return ncclSuccess;
      }
      OPTCAST_NCCL_WARN("dropping a connection from {} that did not present this listener's handle", pa.peer);
      drop = true;
    }
    if (!drop && pa.deadline.Expired()) drop = true;
    it = drop ? l->pending.erase(it) : it + 1;
  }
  return ncclSuccess;
}

ncclResult_t Isend(void* send_comm, void* data, size_t size, int tag, void* /*mhandle*/, void** request) {
  auto* c = static_cast<SendComm*>(send_comm);
  std::lock_guard<std::mutex> lock(c->mu);
  return c->Isend(data, size, tag, request);
}

ncclResult_t Irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** /*mhandles*/,
                   void** request) {
  auto* c = static_cast<RecvComm*>(recv_comm);
  std::lock_guard<std::mutex> lock(c->mu);
  return c->Irecv(n, data, sizes, tags, request);
}

ncclResult_t Iflush(void* /*recv_comm*/, void** request) {
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t Test(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  *done = 0;
  if (r == nullptr || r->magic != kRequestMagic) {
    OPTCAST_NCCL_WARN("test with a request that this plugin did not create (or already completed)");
    return ncclInvalidArgument;
  }
  CommBase* c = r->comm;
  std::lock_guard<std::mutex> lock(c->mu);
  if (!r->done) c->Progress();
  if (!r->done) return c->broken().ok() ? ncclSuccess : ResultFor(c->broken());
  *done = 1;
  if (sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(std::min<size_t>(r->bytes[i], INT_MAX));
  }
  c->FreeRequest(r);
  return ncclSuccess;
}

ncclResult_t CloseSend(void* send_comm) {
  delete static_cast<SendComm*>(send_comm);
  return ncclSuccess;
}

ncclResult_t CloseRecv(void* recv_comm) {
  delete static_cast<RecvComm*>(recv_comm);
  return ncclSuccess;
}

ncclResult_t CloseListen(void* listen_comm) {
  delete static_cast<ListenComm*>(listen_comm);
  return ncclSuccess;
}

}  // namespace optcast::nccl::net
