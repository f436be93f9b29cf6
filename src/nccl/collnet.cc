// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "nccl/collnet.h"

#include <netinet/in.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "common/env.h"
#include "nccl/interfaces.h"
#include "nccl/logging.h"
#include "nccl/memory.h"
#include "optcast/communicator.h"
#include "transport/endpoint.h"
#include "wire/protocol.h"

namespace optcast::nccl::collnet {

namespace {

constexpr uint64_t kHandleMagic = 0x3148434c4f43504f;   // "OPCOLCH1"
constexpr uint64_t kListenMagic = 0x314e53494c43504f;   // "OPCLISN1"
constexpr uint64_t kRequestMagic = 0x3151455243504f43;  // "COPCREQ1"
// Requests in flight per collComm: NCCL keeps up to NCCL_STEPS (8) per channel and many
// channels share one collComm. Past this, calls answer "not now" (null request).
constexpr size_t kMaxRequests = 8 * 64;

// What listen() writes into NCCL's 128-byte handle. Every byte is defined (reserved bytes are
// zero) because the job id hashes whole handles.
struct CollHandle {
  uint64_t magic;
  uint8_t nonce[16];
  uint32_t pid;
  uint16_t family;
  uint16_t reserved0;
  uint8_t address[16];  // the listener's interface address, for diagnostics
  uint8_t reserved[kNetHandleMaxSize - 48];
};
static_assert(sizeof(CollHandle) == kNetHandleMaxSize);

struct ListenComm {
  uint64_t magic = kListenMagic;
  int dev = 0;
};

struct Copy {
  const uint8_t* src;
  uint8_t* dst;
  size_t len;
};

class CollComm;

// One slot of a collComm's request pool. Staging buffers are kept across uses.
struct CollRequest {
  uint64_t magic = kRequestMagic;
  CollComm* comm = nullptr;
  Request* op = nullptr;    // the Optcast collective in flight
  size_t bytes = 0;         // what test() reports
  std::vector<Copy> after;  // copies out of staging once the collective is done
  std::vector<uint8_t> recv_staging;
  std::vector<uint8_t> send_staging;
};

class CollComm {
 public:
  CollComm(std::unique_ptr<Communicator> comm, std::string job) : comm_(std::move(comm)), job_(std::move(job)) {}

  std::mutex mu;
  Communicator& comm() { return *comm_; }
  int rank() const { return comm_->rank(); }
  int nranks() const { return comm_->nranks(); }
  const std::string& job() const { return job_; }

  // Says in NCCL's log, once per failover, that a server of this job died and the job went on:
  // the client library's own log is on stderr, which NCCL users may not watch.
  void ReportFailovers() {
    const FailoverStats now = comm_->failover_stats();
    if (now.failovers <= failovers_reported_) return;
    failovers_reported_ = now.failovers;
    OPTCAST_NCCL_WARN(
        "CollNet job {} (rank {} of {}) failed over: a reduction server died; {} failover(s) so far, {} reduction "
        "server(s) left, requests in flight complete on them",
        job_, rank(), nranks(), now.failovers, now.servers_left);
  }

  CollRequest* Acquire() {
    if (free_.empty()) {
      if (slots_.size() >= kMaxRequests) return nullptr;
      slots_.push_back(std::make_unique<CollRequest>());
      slots_.back()->comm = this;
      free_.push_back(slots_.back().get());
    }
    CollRequest* r = free_.back();
    free_.pop_back();
    r->magic = kRequestMagic;
    r->op = nullptr;
    r->bytes = 0;
    r->after.clear();
    return r;
  }
  void Release(CollRequest* r) {
    r->magic = 0;  // a second test() on it is caught
    r->op = nullptr;
    free_.push_back(r);
  }

 private:
  std::unique_ptr<Communicator> comm_;
  std::string job_;
  uint32_t failovers_reported_ = 0;
  std::vector<std::unique_ptr<CollRequest>> slots_;
  std::vector<CollRequest*> free_;
};

// What to do about a failure, appended to the WARN after the client's own explanation.
const char* Advice(Code code) {
  switch (code) {
    case Code::kTimeout:
      return "Check that every rank's process is alive and issues the same collectives; `optcast server --log-level "
             "info` shows which ranks a server waits for. OPTCAST_TIMEOUT_MS sets the limit";
    case Code::kUnavailable:
      return "Check that the servers in OPTCAST_SERVERS run (`optcast server --listen HOST:PORT`) and are reachable "
             "from this host";
    case Code::kPeerFailed: return "Another rank of this job failed; its own WARN says why";
    case Code::kMismatch:
      return "Every rank must load the same plugin build and set the same OPTCAST_SERVERS (same order) and "
             "OPTCAST_CHUNK_BYTES";
    case Code::kProtocol:
      return "Check that OPTCAST_SERVERS names Optcast reduction servers of the same release as this plugin";
    default: return "";
  }
}

// The client's explanation of `st`, then what to do about it.
std::string Explain(const Status& st) {
  const char* advice = Advice(st.code());
  return *advice == '\0' ? st.message() : st.message() + ". " + advice;
}

ncclResult_t ResultFor(const Status& st) {
  switch (st.code()) {
    case Code::kInvalidArgument: return ncclInvalidArgument;
    case Code::kMismatch: return ncclInvalidUsage;
    case Code::kUnavailable:
    case Code::kPeerFailed:
    case Code::kTimeout: return ncclRemoteError;
    default: return ncclSystemError;
  }
}

// Runs `issue(slot)` on a free request slot of `c` (it starts the Optcast collective and may
// record copies to do on completion), or answers "not now" with a null request.
template <typename Issue>
ncclResult_t Start(CollComm* c, const char* what, size_t bytes, void** request, Issue&& issue) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(c->mu);
  CollRequest* slot = c->Acquire();
  if (slot == nullptr) return ncclSuccess;
  slot->bytes = bytes;
  Status st = issue(slot);
  if (!st.ok()) {
    OPTCAST_NCCL_WARN("CollNet {} of {} bytes failed (rank {} of {}, job {}): {}", what, bytes, c->rank(), c->nranks(),
                      c->job(), Explain(st));
    c->Release(slot);
    return ResultFor(st);
  }
  *request = slot;
  return ncclSuccess;
}

// The byte range [begin, end) where rank `rank`'s part meets the window.
void OwnRange(int rank, size_t bytes_per_rank, size_t window_offset, size_t window_bytes, size_t* begin, size_t* end) {
  const size_t part_begin = static_cast<size_t>(rank) * bytes_per_rank;
  const size_t part_end = part_begin + bytes_per_rank;
  *begin = std::max(part_begin, window_offset);
  *end = std::min(part_end, window_offset + window_bytes);
  if (*end < *begin) *end = *begin;
}

ncclResult_t CheckWindow(const CollComm* c, const char* what, int nparts, const Sge* parts, size_t bytes_per_rank,
                         size_t window_offset, size_t window_bytes) {
  size_t total = 0;
  for (int i = 0; i < nparts; ++i) total += parts[i].size;
  const size_t all = static_cast<size_t>(c->nranks()) * bytes_per_rank;
  if (nparts < 1 || total != window_bytes || window_offset > all || window_bytes > all - window_offset) {
    OPTCAST_NCCL_WARN(
        "CollNet {}: a window of {} bytes at {} over {} parts of {} bytes (total {}) does not fit {} "
        "ranks x {} bytes",
        what, window_bytes, window_offset, nparts, total, total, c->nranks(), bytes_per_rank);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

std::once_flag g_init_once;

}  // namespace

bool ToOptcastType(int nccl_dtype, DataType* out) {
  switch (nccl_dtype) {
    case ncclInt8: *out = DataType::kInt8; return true;
    case ncclUint8: *out = DataType::kUInt8; return true;
    case ncclInt32: *out = DataType::kInt32; return true;
    case ncclUint32: *out = DataType::kUInt32; return true;
    case ncclInt64: *out = DataType::kInt64; return true;
    case ncclUint64: *out = DataType::kUInt64; return true;
    case ncclFloat16: *out = DataType::kFloat16; return true;
    case ncclFloat32: *out = DataType::kFloat32; return true;
    case ncclFloat64: *out = DataType::kFloat64; return true;
    case ncclBfloat16: *out = DataType::kBFloat16; return true;
    default: return false;  // fp8 and anything newer
  }
}

bool ToOptcastOp(int nccl_op, RedOp* out) {
  // NCCL numbers max before min; Optcast the other way round.
  switch (nccl_op) {
    case ncclSum: *out = RedOp::kSum; return true;
    case ncclProd: *out = RedOp::kProd; return true;
    case ncclMax: *out = RedOp::kMax; return true;
    case ncclMin: *out = RedOp::kMin; return true;
    default: return false;  // avg (NCCL never sends it to CollNet) and user-defined operators
  }
}

JobId JobIdFromHandles(const void* const* handles, int nranks) {
  static constexpr char kDomain[] = "optcast/nccl-collnet/v1";
  std::vector<uint8_t> bytes(kDomain, kDomain + sizeof(kDomain) - 1);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(static_cast<uint64_t>(nranks) >> (8 * i)));
  for (int r = 0; r < nranks; ++r) {
    const auto* h = static_cast<const uint8_t*>(handles[r]);
    bytes.insert(bytes.end(), h, h + kNetHandleMaxSize);
  }
  // Two independent 64-bit hashes: FNV-1a over bytes, and a splitmix64-finalised
  // multiply-rotate over little-endian 64-bit words.
  uint64_t fnv = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    fnv ^= b;
    fnv *= 0x100000001b3ull;
  }
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  uint64_t words = 0x9e3779b97f4a7c15ull ^ bytes.size();
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t w = 0;
    for (size_t k = 0; k < 8 && i + k < bytes.size(); ++k) w |= static_cast<uint64_t>(bytes[i + k]) << (8 * k);
    words = mix(words ^ (w * 0xc2b2ae3d27d4eb4full));
    words = (words << 27) | (words >> 37);
  }
  words = mix(words ^ bytes.size());
  fnv = mix(fnv);
  JobId id;
  for (int i = 0; i < 8; ++i) {
    id.bytes[i] = static_cast<uint8_t>(fnv >> (8 * i));
    id.bytes[8 + i] = static_cast<uint8_t>(words >> (8 * i));
  }
  return id;
}

ncclResult_t Init() {
  std::call_once(g_init_once, [] {
    auto servers = GetEnv("OPTCAST_SERVERS");
    if (!servers) {
      // A warning, since NCCL falls back silently; only INFO when CollNet was switched off anyway.
      const auto enable = GetEnv("NCCL_COLLNET_ENABLE");
      const ncclDebugLogLevel level = enable && *enable == "0" ? NCCL_LOG_INFO : NCCL_LOG_WARN;
      LogLine(level, NCCL_INIT | NCCL_NET, __FILE__, __LINE__,
              "OPTCAST_SERVERS is not set; CollNet disabled. Set OPTCAST_SERVERS=host:port[,host:port...] to "
              "offload AllReduce to Optcast reduction servers");
      return;
    }
    std::vector<transport::Endpoint> eps;
    Status st = transport::ParseEndpointList(*servers, &eps, wire::kDefaultPort);
    if (!st.ok()) {
      OPTCAST_NCCL_WARN(
          "OPTCAST_SERVERS='{}' is not usable ({}); CollNet disabled. Write it as host:port[,host:port...] (port "
          "defaults to {}), the same in every process",
          *servers, st.message(), wire::kDefaultPort);
      return;
    }
    OPTCAST_NCCL_INFO(NCCL_INIT | NCCL_NET,
                      "CollNet available: {} reduction server(s) {}; it is used when NCCL_COLLNET_ENABLE=1 and "
                      "the job spans at least NCCL_COLLNET_NODE_THRESHOLD nodes",
                      eps.size(), *servers);
  });
  return ncclSuccess;
}

int DeviceCount() {
  auto servers = GetEnv("OPTCAST_SERVERS");
  if (!servers) return 0;
  std::vector<transport::Endpoint> eps;
  if (!transport::ParseEndpointList(*servers, &eps, wire::kDefaultPort).ok()) return 0;
  return nccl::Devices().empty() ? 0 : 1;
}

ncclResult_t Listen(int dev, void* handle, void** listen_comm) {
  *listen_comm = nullptr;
  if (dev != 0) {
    OPTCAST_NCCL_WARN("CollNet listen on device {}, but devices() reported one CollNet device (0)", dev);
    return ncclInvalidArgument;
  }
  std::memset(handle, 0, kNetHandleMaxSize);
  auto* h = static_cast<CollHandle*>(handle);
  h->magic = kHandleMagic;
  if (getrandom(h->nonce, sizeof(h->nonce), 0) != static_cast<ssize_t>(sizeof(h->nonce))) {
    // Only ancient kernels lack getrandom; a fresh random job id still separates communicators.
    const JobId fallback = JobId::Random();
    std::memcpy(h->nonce, fallback.bytes.data(), sizeof(h->nonce));
  }
  h->pid = static_cast<uint32_t>(::getpid());
  const auto& devices = nccl::Devices();
  if (!devices.empty()) {
    const sockaddr_storage& a = devices[0].addr;
    h->family = a.ss_family;
    if (a.ss_family == AF_INET) {
      std::memcpy(h->address, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, 4);
    } else if (a.ss_family == AF_INET6) {
      std::memcpy(h->address, &reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr, 16);
    }
  }
  *listen_comm = new ListenComm{kListenMagic, dev};
  return ncclSuccess;
}

ncclResult_t Connect(void* const* handles, int nranks, int rank, void* listen_comm, void** coll_comm) {
  *coll_comm = nullptr;
  if (handles == nullptr || nranks < 1 || rank < 0 || rank >= nranks) {
    OPTCAST_NCCL_WARN("CollNet connect with rank {} of {} ranks", rank, nranks);
    return ncclInvalidArgument;
  }
  auto* l = static_cast<ListenComm*>(listen_comm);
  if (l == nullptr || l->magic != kListenMagic) {
    OPTCAST_NCCL_WARN("CollNet connect with a listen comm that this plugin did not create");
    return ncclInvalidArgument;
  }
  for (int r = 0; r < nranks; ++r) {
    if (handles[r] == nullptr || static_cast<const CollHandle*>(handles[r])->magic != kHandleMagic) {
      OPTCAST_NCCL_WARN(
          "CollNet connect: the handle of rank {} is not an Optcast handle; do all ranks load the "
          "same plugin?",
          r);
      return ncclInvalidArgument;
    }
  }
  CommunicatorOptions opts;
  Status st = ApplyEnvironment(&opts);
  if (!st.ok()) {
    OPTCAST_NCCL_WARN("CollNet disabled: {}. Fix it in every process, or unset it for the default", st.message());
    return ncclInvalidUsage;
  }
  if (opts.servers.empty()) {
    OPTCAST_NCCL_WARN(
        "OPTCAST_SERVERS is not set; CollNet disabled. Set OPTCAST_SERVERS=host:port[,host:port...] in every "
        "process, or leave NCCL_COLLNET_ENABLE unset");
    return ncclInvalidUsage;
  }
  opts.job_id = JobIdFromHandles(handles, nranks);
  opts.nranks = nranks;
  opts.rank = rank;
  const std::string job = opts.job_id.ToHex();
  std::string servers;
  for (const auto& s : opts.servers) servers += (servers.empty() ? "" : ",") + s;
  // Blocks, like every CollNet plugin's connect, but never past the connect timeout (retrying
  // refused connections) plus OPTCAST_TIMEOUT_MS per server for its welcome.
  std::unique_ptr<Communicator> comm;
  st = Communicator::Create(opts, &comm);
  if (!st.ok()) {
    OPTCAST_NCCL_WARN(
        "CollNet NOT active: rank {} of {} cannot join job {} on the reduction servers {} (OPTCAST_SERVERS, "
        "OPTCAST_CONNECT_TIMEOUT_MS={}): {}. NCCL falls back to point-to-point algorithms",
        rank, nranks, job, servers, opts.connect_timeout.count(), Explain(st));
    return ResultFor(st);
  }
  OPTCAST_NCCL_INFO(NCCL_INIT | NCCL_NET, "CollNet active: rank {} of {} joined job {} on {} reduction server(s) {}",
                    rank, nranks, job, opts.servers.size(), servers);
  *coll_comm = new CollComm(std::move(comm), job);
  return ncclSuccess;
}

ncclResult_t ReduceSupport(int nccl_dtype, int nccl_op, int* supported) {
  DataType dt;
  RedOp op;
  *supported = ToOptcastType(nccl_dtype, &dt) && ToOptcastOp(nccl_op, &op) ? 1 : 0;
  return ncclSuccess;
}

ncclResult_t IAllReduce(void* coll_comm, const void* send, void* recv, size_t count, int nccl_dtype, int nccl_op,
                        void** request) {
  auto* c = static_cast<CollComm*>(coll_comm);
  DataType dt;
  RedOp op;
  if (!ToOptcastType(nccl_dtype, &dt) || !ToOptcastOp(nccl_op, &op)) {
    OPTCAST_NCCL_WARN("CollNet iallreduce with NCCL type {} op {}, which reduceSupport refused", nccl_dtype, nccl_op);
    return ncclInvalidArgument;
  }
  return Start(c, "allreduce", count * DataTypeSize(dt), request,
               [&](CollRequest* slot) { return c->comm().IAllReduce(send, recv, count, dt, op, &slot->op); });
}

ncclResult_t IAllGather(void* coll_comm, const void* send, const Sge* recv_parts, int nparts, size_t bytes_per_rank,
                        size_t window_offset, size_t window_bytes, void** request) {
  auto* c = static_cast<CollComm*>(coll_comm);
  if (ncclResult_t r = CheckWindow(c, "iallgather", nparts, recv_parts, bytes_per_rank, window_offset, window_bytes);
      r != ncclSuccess) {
    return r;
  }
  return Start(c, "allgather", window_bytes, request, [&](CollRequest* slot) {
    // One part: results land in place. Several: gather into staging, scatter when done.
    uint8_t* dst = static_cast<uint8_t*>(recv_parts[0].address);
    if (nparts > 1) {
      slot->recv_staging.resize(window_bytes);
      dst = slot->recv_staging.data();
      size_t at = 0;
      for (int i = 0; i < nparts; ++i) {
        slot->after.push_back({dst + at, static_cast<uint8_t*>(recv_parts[i].address), recv_parts[i].size});
        at += recv_parts[i].size;
      }
    }
    const size_t all = static_cast<size_t>(c->nranks()) * bytes_per_rank;
    if (window_offset == 0 && window_bytes == all) {
      // The whole gathered buffer: a true Optcast all-gather (each rank sends only its part).
      return c->comm().IAllGather(send, dst, bytes_per_rank, DataType::kUInt8, &slot->op);
    }
    // A window crossing parts unevenly has no all-gather form (ranks contribute different
    // amounts). Each rank places its bytes in a zeroed window and the servers take the
    // bytewise max: exact, since exactly one rank owns every byte.
    size_t own_begin, own_end;
    OwnRange(c->rank(), bytes_per_rank, window_offset, window_bytes, &own_begin, &own_end);
    const size_t at = own_begin - window_offset;
    const size_t len = own_end - own_begin;
    if (len > 0) std::memmove(dst + at, send, len);  // before zeroing: send may alias dst
    std::memset(dst, 0, len > 0 ? at : window_bytes);
    if (len > 0) std::memset(dst + at + len, 0, window_bytes - at - len);
    return c->comm().IAllReduce(dst, dst, window_bytes, DataType::kUInt8, RedOp::kMax, &slot->op);
  });
}

ncclResult_t IReduceScatter(void* coll_comm, const Sge* send_parts, int nparts, void* recv, size_t bytes_per_rank,
                            size_t window_offset, size_t window_bytes, int nccl_dtype, int nccl_op, void** request) {
  auto* c = static_cast<CollComm*>(coll_comm);
  DataType dt;
  RedOp op;
  if (!ToOptcastType(nccl_dtype, &dt) || !ToOptcastOp(nccl_op, &op)) {
    OPTCAST_NCCL_WARN("CollNet ireducescatter with NCCL type {} op {}, which reduceSupport refused", nccl_dtype,
                      nccl_op);
    return ncclInvalidArgument;
  }
  if (ncclResult_t r =
          CheckWindow(c, "ireducescatter", nparts, send_parts, bytes_per_rank, window_offset, window_bytes);
      r != ncclSuccess) {
    return r;
  }
  const size_t esize = DataTypeSize(dt);
  if (bytes_per_rank % esize != 0 || window_offset % esize != 0 || window_bytes % esize != 0) {
    OPTCAST_NCCL_WARN("CollNet ireducescatter: window {}+{} or part size {} is not a multiple of the {}-byte element",
                      window_offset, window_bytes, bytes_per_rank, esize);
    return ncclInvalidArgument;
  }
  return Start(c, "reducescatter", window_bytes, request, [&](CollRequest* slot) {
    const uint8_t* src = static_cast<const uint8_t*>(send_parts[0].address);
    if (nparts > 1) {
      slot->send_staging.resize(window_bytes);
      size_t at = 0;
      for (int i = 0; i < nparts; ++i) {
        std::memcpy(slot->send_staging.data() + at, send_parts[i].address, send_parts[i].size);
        at += send_parts[i].size;
      }
      src = slot->send_staging.data();
    }
    const size_t all = static_cast<size_t>(c->nranks()) * bytes_per_rank;
    if (window_offset == 0 && window_bytes == all) {
      // The whole buffer: a true Optcast reduce-scatter (each rank receives only its part).
      return c->comm().IReduceScatter(src, recv, bytes_per_rank / esize, dt, op, &slot->op);
    }
    size_t own_begin, own_end;
    OwnRange(c->rank(), bytes_per_rank, window_offset, window_bytes, &own_begin, &own_end);
    if (own_begin == window_offset && own_end == window_offset + window_bytes) {
      // The window lies inside this rank's part: reduce straight into recv.
      return c->comm().IAllReduce(src, recv, window_bytes / esize, dt, op, &slot->op);
    }
    // Other ranks own (some of) the window: every rank must still contribute, so reduce the
    // window into staging and keep this rank's share.
    slot->recv_staging.resize(window_bytes);
    if (own_end > own_begin) {
      slot->after.push_back(
          {slot->recv_staging.data() + (own_begin - window_offset), static_cast<uint8_t*>(recv), own_end - own_begin});
    }
    return c->comm().IAllReduce(src, slot->recv_staging.data(), window_bytes / esize, dt, op, &slot->op);
  });
}

ncclResult_t RegMr(void* coll_comm, void* data, size_t size, int type, void** mhandle) {
  auto* c = static_cast<CollComm*>(coll_comm);
  if (c == nullptr) {
    OPTCAST_NCCL_WARN("CollNet regMr without a collComm");
    return ncclInvalidArgument;
  }
  const ncclResult_t r = RegisterMemory(data, size, type, mhandle);
  if (r != ncclSuccess) return r;
  MemRegion* region = static_cast<MemRegion*>(*mhandle);
  const Status st = c->comm().RegisterMemory(data, size, &region->registered);
  if (!st.ok()) {
    OPTCAST_NCCL_WARN("CollNet regMr of {} bytes at {} for job {} failed: {}", size, data, c->job(), Explain(st));
    (void)DeregisterMemory(*mhandle);
    *mhandle = nullptr;
    return ResultFor(st);
  }
  return ncclSuccess;
}

ncclResult_t DeregMr(void* coll_comm, void* mhandle) {
  if (mhandle == nullptr) return ncclSuccess;
  auto* c = static_cast<CollComm*>(coll_comm);
  MemRegion* region = RegionOf(mhandle);
  if (region == nullptr) return ncclInvalidArgument;
  if (region->registered != nullptr) {
    if (c == nullptr) {
      OPTCAST_NCCL_WARN("CollNet deregMr without the collComm that registered the buffer");
      return ncclInvalidArgument;
    }
    const Status st = c->comm().DeregisterMemory(region->registered);
    if (!st.ok()) {
      OPTCAST_NCCL_WARN("CollNet deregMr for job {}: {}", c->job(), st.message());
      return ncclInvalidArgument;
    }
    region->registered = nullptr;
  }
  return DeregisterMemory(mhandle);
}

ncclResult_t Iflush(void** request) {
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t Test(void* request, int* done, int* size) {
  *done = 0;
  auto* slot = static_cast<CollRequest*>(request);
  if (slot == nullptr || slot->magic != kRequestMagic) {
    OPTCAST_NCCL_WARN("CollNet test with a request that this plugin did not create (or already completed)");
    return ncclInvalidArgument;
  }
  CollComm* c = slot->comm;
  std::lock_guard<std::mutex> lock(c->mu);
  bool finished = false;
  Status st = c->comm().Test(slot->op, &finished);
  c->ReportFailovers();
  if (!finished) {
    if (st.ok()) return ncclSuccess;
    OPTCAST_NCCL_WARN("CollNet test failed (rank {} of {}, job {}): {}", c->rank(), c->nranks(), c->job(), Explain(st));
    return ResultFor(st);
  }
  if (!st.ok()) {
    OPTCAST_NCCL_WARN("CollNet collective failed (rank {} of {}, job {}): {}", c->rank(), c->nranks(), c->job(),
                      Explain(st));
    c->Release(slot);
    return ResultFor(st);
  }
  for (const Copy& cp : slot->after) std::memcpy(cp.dst, cp.src, cp.len);
  if (size != nullptr) *size = static_cast<int>(std::min<size_t>(slot->bytes, INT_MAX));
  *done = 1;
  c->Release(slot);
  return ncclSuccess;
}

ncclResult_t CloseColl(void* coll_comm) {
  auto* c = static_cast<CollComm*>(coll_comm);
  if (c != nullptr) {
    OPTCAST_NCCL_INFO(NCCL_INIT | NCCL_NET, "CollNet rank {} of {} leaves job {}", c->rank(), c->nranks(), c->job());
  }
  delete c;
  return ncclSuccess;
}

ncclResult_t CloseListen(void* listen_comm) {
  auto* l = static_cast<ListenComm*>(listen_comm);
  if (l != nullptr && l->magic == kListenMagic) {
    l->magic = 0;
    delete l;
  }
  return ncclSuccess;
}

}  // namespace optcast::nccl::collnet
