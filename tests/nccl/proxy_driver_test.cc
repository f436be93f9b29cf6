// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// NCCL's proxy played by several processes. Reduction servers run in forked children; every
// rank is another forked child that dlopens the plugin itself and calls it in the order NCCL's
// proxy does: net init -> collnet init -> devices -> getProperties -> reduceSupport -> listen
// (one per channel) -> handles all-gathered through the parent (NCCL's bootstrap) -> connect ->
// regMr -> up to 8 collectives in flight per channel -> test until done -> deregMr -> closeColl
// -> finalize. Children check with gtest macros, print what they logged when something failed,
// and report by exit code; the parent kills any child still running after 60 s.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "plugin_harness.h"
#include "reduce/half.h"
#include "server/server.h"
#include "tests/support/fd_io.h"

namespace optcast::nccl::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testsupport::ReadAll;
using testsupport::WriteAll;
constexpr auto kChildLimit = std::chrono::seconds(60);
constexpr size_t kHandle = kNetHandleMaxSize;
constexpr int kStepsPerChannel = 8;  // NCCL_STEPS: requests NCCL keeps in flight per channel

long long MsSince(Clock::time_point t) { return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count(); }

// ---- processes -------------------------------------------------------------------------------

// Dies with the test process, so that no child outlives a crashed parent.
void DieWithParent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) std::_Exit(9);
}

struct Child {
  std::string name;
  pid_t pid = -1;
  int fd = -1;  // the parent's end of a socketpair with the child
};

// Forks a child that runs body(fd) and exits with its result. exit(), not _exit(), so that
// sanitizers check the child as well.
Child Fork(const std::string& name, const std::function<int(int fd)>& body) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    ADD_FAILURE() << "socketpair: " << std::strerror(errno);
    return {};
  }
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    ::close(sv[0]);
    ::close(sv[1]);
    return {};
  }
  if (pid == 0) {
    DieWithParent(parent);
    ::close(sv[0]);
    int code = 1;
    try {
      code = body(sv[1]);
    } catch (...) {
      std::fprintf(stderr, "%s: exception\n", name.c_str());
    }
    std::fflush(nullptr);
    std::exit(code);
  }
  ::close(sv[1]);
  return {name, pid, sv[0]};
}

// Runs a gtest-style body in a child: 0 when it recorded no failure. On failure, prints every
// line the plugin logged through the (test) NCCL logger.
int ChildBody(const std::string& name, const std::function<void()>& body) {
  body();
  if (!::testing::Test::HasFailure()) return 0;
  for (const auto& line : LoggedLines()) std::fprintf(stderr, "[%s log] %s\n", name.c_str(), line.c_str());
  return 1;
}

// Waits for every child until `deadline`, then kills what is left. Checks each exit code.
void ExpectExits(std::vector<Child>& kids, const std::vector<int>& codes, Clock::time_point deadline) {
  std::vector<bool> reaped(kids.size(), false);
  size_t left = kids.size();
  for (size_t i = 0; i < kids.size(); ++i) {
    if (kids[i].pid <= 0) reaped[i] = true, --left;  // never started (a failure was recorded)
  }
  while (left > 0) {
    for (size_t i = 0; i < kids.size(); ++i) {
      if (reaped[i]) continue;
      int status = 0;
      if (::waitpid(kids[i].pid, &status, WNOHANG) != kids[i].pid) continue;
      reaped[i] = true;
      --left;
      if (WIFEXITED(status)) {
        EXPECT_EQ(WEXITSTATUS(status), codes[i]) << kids[i].name << " exited with " << WEXITSTATUS(status);
      } else {
        ADD_FAILURE() << kids[i].name << " died of signal " << WTERMSIG(status);
      }
    }
    if (left == 0) break;
    if (Clock::now() > deadline) {
      for (size_t i = 0; i < kids.size(); ++i) {
        if (reaped[i]) continue;
        ADD_FAILURE() << kids[i].name << " still running after the deadline; killed (a hang)";
        ::kill(kids[i].pid, SIGKILL);
        ::waitpid(kids[i].pid, nullptr, 0);
      }
      break;
    }
    ::usleep(5000);
  }
  for (auto& k : kids) {
    if (k.fd >= 0) ::close(k.fd);
    k.fd = -1;
  }
}

// NCCL's bootstrap all-gather of the listen handles, with the parent in the middle: every rank
// sends `bytes`, then receives everyone's, rank by rank. False when a rank died first.
bool AllGatherThroughParent(const std::vector<Child>& ranks, size_t bytes, Clock::time_point deadline) {
  std::vector<uint8_t> all(ranks.size() * bytes);
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ReadAll(ranks[r].fd, all.data() + r * bytes, bytes, deadline)) {
      ADD_FAILURE() << ranks[r].name << " sent no handles";
      return false;
    }
  }
  for (const auto& r : ranks) (void)WriteAll(r.fd, all.data(), all.size());
  return true;
}

// The child's side of that all-gather.
bool AllGatherHandles(int fd, const std::vector<uint8_t>& mine, int nranks, std::vector<uint8_t>* all) {
  all->resize(static_cast<size_t>(nranks) * mine.size());
  return WriteAll(fd, mine.data(), mine.size()) &&
         ReadAll(fd, all->data(), all->size(), Clock::now() + std::chrono::seconds(30));
}

// Reduction servers, each in its own process (forked before any rank, while this process has
// no threads), on 127.0.0.1 with ports the kernel picks.
class ServerProcesses {
 public:
  explicit ServerProcesses(int n) {
    for (int i = 0; i < n; ++i) {
      Child c = Fork("server " + std::to_string(i), [](int fd) {
        server::ServerOptions opts;
        opts.listen = {"127.0.0.1", 0};
        // The same transport as the plugin's communicators (OPTCAST_TRANSPORT).
        if (!transport::KindFromEnvironment(transport::Kind::kTcp, &opts.transport.kind).ok()) return 2;
        server::Server s(opts);
        const Status st = s.Start();
        const uint16_t port = st.ok() ? s.port() : 0;
        (void)WriteAll(fd, &port, sizeof(port));
        if (!st.ok()) return 1;
        (void)s.Run();
        return 0;
      });
      uint16_t port = 0;
      if (c.pid <= 0 || !ReadAll(c.fd, &port, sizeof(port), Clock::now() + std::chrono::seconds(10)) || port == 0) {
        ADD_FAILURE() << "server " << i << " did not start";
      }
      pids_.push_back(c.pid);
      ports_.push_back(port);
      ::close(c.fd);
      addresses_ += (i ? "," : "") + Address(i);
    }
  }
  ~ServerProcesses() {
    for (size_t i = 0; i < pids_.size(); ++i) Kill(static_cast<int>(i));
  }
  ServerProcesses(const ServerProcesses&) = delete;
  ServerProcesses& operator=(const ServerProcesses&) = delete;

  const std::string& addresses() const { return addresses_; }
  std::string Address(int i) const { return "127.0.0.1:" + std::to_string(ports_[i]); }
  pid_t pid(int i) const { return pids_[i]; }
  void Kill(int i) {
    if (pids_[i] <= 0) return;
    ::kill(pids_[i], SIGKILL);
    ::waitpid(pids_[i], nullptr, 0);
    pids_[i] = -1;
  }

 private:
  std::vector<pid_t> pids_;
  std::vector<uint16_t> ports_;
  std::string addresses_;
};

// A loopback port with nothing listening on it.
uint16_t DeadPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// ---- what a child checks in what the plugin logged -------------------------------------------

// True when a WARN line contains every one of `needles`.
bool Warned(std::initializer_list<std::string> needles) {
  for (const auto& line : LoggedLines()) {
    if (line.rfind("WARN ", 0) != 0) continue;
    bool all = true;
    for (const auto& n : needles) all = all && line.find(n) != std::string::npos;
    if (all) return true;
  }
  return false;
}

int CountWarnings() {
  int n = 0;
  for (const auto& line : LoggedLines()) n += line.rfind("WARN ", 0) == 0 ? 1 : 0;
  return n;
}

// ---- reference values: small integers, exact in every type ------------------------------------

bool IsSigned(ncclDataType_t dt) { return dt != ncclUint8 && dt != ncclUint32 && dt != ncclUint64; }

size_t ElemSize(ncclDataType_t dt) {
  switch (dt) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

// IEEE binary16 and bfloat16 encodings of a small integer, written out here so that the
// reference shares no code with the library: |v| = 1.f x 2^e, exact while |v| < 2^11 (half)
// or 2^8 (bfloat16).
uint16_t HalfOfSmallInt(int64_t v) {
  if (v == 0) return 0;
  const uint64_t m = static_cast<uint64_t>(v < 0 ? -v : v);
  const int e = 63 - __builtin_clzll(m);
  return static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | ((e + 15) << 10) | ((m << (10 - e)) & 0x3ff));
}
uint16_t Bfloat16OfSmallInt(int64_t v) {
  if (v == 0) return 0;
  const uint64_t m = static_cast<uint64_t>(v < 0 ? -v : v);
  const int e = 63 - __builtin_clzll(m);
  return static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | ((e + 127) << 7) | ((m << (7 - e)) & 0x7f));
}

void Store(ncclDataType_t dt, int64_t v, uint8_t* out) {
  auto put = [out](auto x) { std::memcpy(out, &x, sizeof(x)); };
  switch (dt) {
    case ncclInt8: put(static_cast<int8_t>(v)); break;
    case ncclUint8: put(static_cast<uint8_t>(v)); break;
    case ncclInt32: put(static_cast<int32_t>(v)); break;
    case ncclUint32: put(static_cast<uint32_t>(v)); break;
    case ncclInt64: put(static_cast<int64_t>(v)); break;
    case ncclUint64: put(static_cast<uint64_t>(v)); break;
    case ncclFloat16:
    case ncclBfloat16:
      if (v <= -256 || v >= 256) ADD_FAILURE() << v << " is not exact in 16-bit floats";
      put(dt == ncclFloat16 ? HalfOfSmallInt(v) : Bfloat16OfSmallInt(v));
      break;
    case ncclFloat32: put(static_cast<float>(v)); break;
    case ncclFloat64: put(static_cast<double>(v)); break;
    default: ADD_FAILURE() << "type " << dt;
  }
}

// Rank r's element i: -8..8 (0..16 unsigned) or, for prod, mostly 1 with some 2 and -1, so that
// three ranks stay within |48| (sum) and |8| (prod).
int64_t InputValue(ncclDataType_t dt, ncclRedOp_t op, int rank, size_t i, uint32_t salt) {
  if (op == ncclProd) {
    const int k = static_cast<int>((rank * 5 + i * 3 + salt) % 7);
    return k == 0 ? 2 : (k == 1 && IsSigned(dt) ? -1 : 1);
  }
  const int64_t v = static_cast<int64_t>((rank * 7 + i * 13 + salt) % 17) - 8;
  return IsSigned(dt) ? v : v + 8;
}

int64_t Combine(ncclRedOp_t op, int64_t a, int64_t b) {
  switch (op) {
    case ncclSum: return a + b;
    case ncclProd: return a * b;
    case ncclMax: return std::max(a, b);
    default: return std::min(a, b);
  }
}

void FillInput(ncclDataType_t dt, ncclRedOp_t op, int rank, size_t count, uint32_t salt, uint8_t* out) {
  for (size_t i = 0; i < count; ++i) Store(dt, InputValue(dt, op, rank, i, salt), out + i * ElemSize(dt));
}

std::vector<uint8_t> Reduced(ncclDataType_t dt, ncclRedOp_t op, int nranks, size_t count, uint32_t salt) {
  std::vector<uint8_t> v(count * ElemSize(dt));
  for (size_t i = 0; i < count; ++i) {
    int64_t acc = InputValue(dt, op, 0, i, salt);
    for (int r = 1; r < nranks; ++r) acc = Combine(op, acc, InputValue(dt, op, r, i, salt));
    Store(dt, acc, v.data() + i * ElemSize(dt));
  }
  return v;
}

uint8_t GatherByte(int rank, size_t i, uint32_t salt) { return static_cast<uint8_t>(rank * 31 + i * 7 + salt + 1); }

constexpr ncclDataType_t kTypes[] = {ncclInt8,   ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
                                     ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
constexpr ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin};

// ---- the proxy of one rank ---------------------------------------------------------------------

// Table versions a rank may load: NCCL 2.28 takes v11, 2.30 v12.
struct V11 {
  using Net = ncclNet_v11_t;
  using Coll = ncclCollNet_v11_t;
  using Props = ncclNetProperties_v11_t;
  using Sge = ncclNetSGE_v11_t;
  using Config = ncclNetCommConfig_v11_t;
  static constexpr const char* kNet = "ncclNetPlugin_v11";
  static constexpr const char* kColl = "ncclCollNetPlugin_v11";
};
struct V12 {
  using Net = ncclNet_v12_t;
  using Coll = ncclCollNet_v12_t;
  using Props = ncclNetProperties_v12_t;
  using Sge = ncclNetSGE_v12_t;
  using Config = ncclNetCommConfig_v12_t;
  static constexpr const char* kNet = "ncclNetPlugin_v12";
  static constexpr const char* kColl = "ncclCollNetPlugin_v12";
};

// Host memory of one channel, registered once (as NCCL registers its staging buffers).
class Arena {
 public:
  explicit Arena(size_t bytes) : bytes_(bytes, 0xee) {}
  uint8_t* Take(size_t n) {
    used_ = (used_ + 63) & ~size_t{63};
    if (used_ + n > bytes_.size()) {
      ADD_FAILURE() << "test arena too small";
      std::exit(3);
    }
    uint8_t* p = bytes_.data() + used_;
    used_ += n;
    return p;
  }
  uint8_t* data() { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
  size_t used_ = 0;
};

// One NCCL collective as the plugin sees it: one or more calls (pipeline steps or windows),
// then a comparison with the reference once all of them completed.
struct Collective {
  std::string name;
  std::vector<std::function<ncclResult_t(void** request)>> calls;
  std::vector<int> bytes;  // what test() reports for each call
  std::function<void()> check;
  size_t completed = 0;
};

struct InFlight {
  Collective* coll;
  size_t call;
  void* request;
};

struct Channel {
  void* listen = nullptr;
  void* comm = nullptr;
  void* mhandle = nullptr;
  std::unique_ptr<Arena> arena;
  std::vector<std::unique_ptr<Collective>> work;
  size_t next_coll = 0, next_call = 0;
  size_t completed = 0;  // collectives whose every call completed
  std::deque<InFlight> inflight;
};

// What a rank runs beyond the every-type-and-operator work of each channel.
struct ProxyPlan {
  size_t arena_bytes = 8u << 20;  // per channel
  int large_allreduces = 0;       // float32 sums of 512 KiB per channel, NCCL's request size
  // Once every channel has completed this many collectives (and none has posted more than a
  // window beyond), the rank writes one byte to the parent and waits for one back, so that the
  // parent may kill a server while each channel has requests in flight and work left.
  std::vector<size_t> tell_parent_at;
  bool failovers_expected = false;  // servers die under it: WARNs of failover only
};

template <typename V>
class ProxyRank {
 public:
  ProxyRank(int rank, int nranks, int nchannels, int fd, ProxyPlan plan = {})
      : rank_(rank), nranks_(nranks), channels_(nchannels), fd_(fd), plan_(std::move(plan)) {}

  void Run() {
    SCOPED_TRACE("rank " + std::to_string(rank_) + " (" + V::kColl + ")");
    // This process maps the library itself (the parent never did).
    ASSERT_EQ(dlopen(OPTCAST_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD), nullptr);
    auto* net = Table<typename V::Net>(V::kNet);
    cn_ = Table<typename V::Coll>(V::kColl);
    ASSERT_NE(net, nullptr);
    ASSERT_NE(cn_, nullptr);

    // NCCL initializes the net plugin, then CollNet from the same library.
    void* net_ctx = nullptr;
    typename V::Config config{-1};
    ASSERT_EQ(net->init(&net_ctx, 0xabc, &config, TestLogger, nullptr), ncclSuccess);
    int ndev = 0;
    ASSERT_EQ(net->devices(&ndev), ncclSuccess);
    ASSERT_GE(ndev, 1);
    void* ctx = nullptr;
    ASSERT_EQ(cn_->init(&ctx, 0xabc, TestLogger), ncclSuccess);
    ASSERT_EQ(cn_->devices(&ndev), ncclSuccess);
    ASSERT_EQ(ndev, 1);
    typename V::Props props{};
    ASSERT_EQ(cn_->getProperties(0, &props), ncclSuccess);
    EXPECT_EQ(props.ptrSupport, kPtrHost);
    EXPECT_GT(props.maxCollBytes, 0u);
    for (ncclDataType_t dt : kTypes) {
      for (ncclRedOp_t op : kOps) {
        int supported = 0;
        ASSERT_EQ(cn_->reduceSupport(dt, op, &supported), ncclSuccess);
        EXPECT_EQ(supported, 1) << "type " << dt << " op " << op;
      }
    }

    // listen on every channel, all-gather the handles, connect every channel.
    std::vector<uint8_t> mine(channels_.size() * kHandle), all;
    for (size_t c = 0; c < channels_.size(); ++c) {
      ASSERT_EQ(cn_->listen(ctx, 0, mine.data() + c * kHandle, &channels_[c].listen), ncclSuccess);
    }
    ASSERT_TRUE(AllGatherHandles(fd_, mine, nranks_, &all));
    for (size_t c = 0; c < channels_.size(); ++c) {
      std::vector<void*> handles(nranks_);
      for (int r = 0; r < nranks_; ++r) handles[r] = all.data() + (r * channels_.size() + c) * kHandle;
      ASSERT_EQ(cn_->connect(handles.data(), nranks_, rank_, channels_[c].listen, &channels_[c].comm), ncclSuccess);
      ASSERT_NE(channels_[c].comm, nullptr);
      EXPECT_EQ(cn_->closeListen(channels_[c].listen), ncclSuccess);  // NCCL closes it once connected
      channels_[c].arena = std::make_unique<Arena>(plan_.arena_bytes);
      ASSERT_EQ(cn_->regMr(channels_[c].comm, channels_[c].arena->data(), channels_[c].arena->size(), kPtrHost,
                           &channels_[c].mhandle),
                ncclSuccess);
      AddWork(static_cast<int>(c), &channels_[c]);
      for (int i = 0; i < plan_.large_allreduces; ++i) {
        AddAllReduce(&channels_[c], ncclFloat32, ncclSum, 131072, i % 2 == 0, 1, 7000 + 100 * c + i);
      }
    }

    Drive();

    for (auto& ch : channels_) {
      EXPECT_EQ(cn_->deregMr(ch.comm, ch.mhandle), ncclSuccess);
      EXPECT_EQ(cn_->closeColl(ch.comm), ncclSuccess);
    }
    EXPECT_EQ(cn_->finalize(ctx), ncclSuccess);
    EXPECT_EQ(net->finalize(net_ctx), ncclSuccess);

    // One job per channel, and nothing went wrong on the way.
    std::set<std::string> jobs;
    const std::string active =
        "CollNet active: rank " + std::to_string(rank_) + " of " + std::to_string(nranks_) + " joined job ";
    for (const auto& line : LoggedLines()) {
      const size_t at = line.find(active);
      if (at != std::string::npos) jobs.insert(line.substr(at + active.size(), 32));
    }
    EXPECT_EQ(jobs.size(), channels_.size());
    if (plan_.failovers_expected) {
      // Each channel's job says in NCCL's log that it failed over, and ends on one server.
      std::set<std::string> failed_over, on_one_server;
      for (const auto& line : LoggedLines()) {
        if (line.rfind("WARN ", 0) != 0) continue;
        const size_t at = line.find("CollNet job ");
        const bool failover =
            at != std::string::npos && line.find(") failed over: a reduction server died;") != std::string::npos;
        EXPECT_TRUE(failover) << "a warning other than a failover: " << line;
        if (!failover) continue;
        const std::string job = line.substr(at + 12, 32);
        failed_over.insert(job);
        if (line.find("2 failover(s) so far, 1 reduction server(s) left") != std::string::npos)
          on_one_server.insert(job);
      }
      EXPECT_EQ(failed_over.size(), channels_.size());
      EXPECT_EQ(on_one_server.size(), channels_.size());
    } else {
      EXPECT_EQ(CountWarnings(), 0);
    }
    size_t calls = 0;
    for (const auto& ch : channels_) {
      for (const auto& coll : ch.work) calls += coll->calls.size();
    }
    EXPECT_EQ(issued_, calls);
  }

 private:
  // Every type x op as an all-reduce and as a reduce-scatter, plus all-gathers; odd sizes, some
  // in place, some as several pipeline steps or windows, some windows as two SGE parts.
  void AddWork(int c, Channel* ch) {
    constexpr size_t kCounts[] = {1, 3, 7, 31, 257, 1031, 4099, 9973};
    uint32_t salt = static_cast<uint32_t>(c) * 101;
    int k = 0;
    for (ncclDataType_t dt : kTypes) {
      for (ncclRedOp_t op : kOps) {
        const size_t count = kCounts[(k + c) % 8];
        AddAllReduce(ch, dt, op, count, /*in_place=*/k % 2 == 0, count >= 1000 ? 3 : 1, ++salt);
        const size_t per_rank = kCounts[(k + c + 3) % 6];
        const size_t window = (k % 3 == 0) ? 0 : (per_rank * 2) / 3 + 1;  // 0: the whole buffer
        AddReduceScatter(ch, dt, op, per_rank, window, /*in_place=*/k % 4 < 2, ++salt);
        ++k;
      }
    }
    AddAllReduce(ch, ncclFloat32, ncclSum, 200003, true, 4, ++salt);  // several chunks on both servers
    for (size_t part : {size_t{1}, size_t{13}, size_t{4099}, size_t{30011}}) {
      for (int variant = 0; variant < 2; ++variant) {
        const size_t window = variant == 0 ? 0 : (part * nranks_) / 3 + 7;
        AddAllGather(ch, part, window, /*in_place=*/(part + variant) % 2 == 0, ++salt);
      }
    }
  }

  void AddAllReduce(Channel* ch, ncclDataType_t dt, ncclRedOp_t op, size_t count, bool in_place, int steps,
                    uint32_t salt) {
    const size_t es = ElemSize(dt);
    uint8_t* send = ch->arena->Take(count * es);
    uint8_t* recv = in_place ? send : ch->arena->Take(count * es);
    FillInput(dt, op, rank_, count, salt, send);
    auto coll = std::make_unique<Collective>();
    coll->name = "allreduce type " + std::to_string(dt) + " op " + std::to_string(op) + " count " +
                 std::to_string(count) + (in_place ? " in place" : "");
    size_t at = 0;
    for (int s = 0; s < steps; ++s) {
      const size_t n = s == steps - 1 ? count - at : count / steps;
      coll->calls.push_back([this, ch, send, recv, at, n, es, dt, op](void** req) {
        return cn_->iallreduce(ch->comm, send + at * es, recv + at * es, n, dt, op, ch->mhandle, ch->mhandle, req);
      });
      coll->bytes.push_back(static_cast<int>(n * es));
      at += n;
    }
    auto expected = std::make_shared<std::vector<uint8_t>>(Reduced(dt, op, nranks_, count, salt));
    coll->check = [recv, expected, name = coll->name] {
      EXPECT_EQ(0, std::memcmp(recv, expected->data(), expected->size())) << name;
    };
    ch->work.push_back(std::move(coll));
  }

  // NCCL's reduce-scatter in windows of `window` elements (0: one window of the whole buffer).
  void AddReduceScatter(Channel* ch, ncclDataType_t dt, ncclRedOp_t op, size_t per_rank, size_t window, bool in_place,
                        uint32_t salt) {
    const size_t es = ElemSize(dt);
    const size_t part = per_rank * es;
    const size_t all = part * nranks_;
    const size_t own = part * rank_;
    uint8_t* in = ch->arena->Take(all);
    FillInput(dt, op, rank_, per_rank * nranks_, salt, in);
    uint8_t* out = in_place ? in + own : ch->arena->Take(part);
    auto coll = std::make_unique<Collective>();
    coll->name = "reducescatter type " + std::to_string(dt) + " op " + std::to_string(op) + " " +
                 std::to_string(per_rank) + " per rank, window " + std::to_string(window) +
                 (in_place ? " in place" : "");
    const size_t step = window == 0 ? all : window * es;
    int k = 0;
    for (size_t w = 0; w < all; w += step, ++k) {
      const size_t wbytes = std::min(step, all - w);
      std::vector<typename V::Sge> parts;
      if ((k + salt) % 2 == 1 && wbytes >= 2 * es) {
        const size_t half = (wbytes / es / 2) * es;  // keep elements whole
        parts.push_back({ch->mhandle, in + w, half});
        parts.push_back({ch->mhandle, in + w + half, wbytes - half});
      } else {
        parts.push_back({ch->mhandle, in + w, wbytes});
      }
      // NCCL passes the first byte of this rank's share of the window.
      uint8_t* recv = out + std::min(std::max(w, own) - own, part);
      coll->calls.push_back([this, ch, parts, recv, part, w, wbytes, dt, op](void** req) mutable {
        return cn_->ireducescatter(ch->comm, static_cast<int>(parts.size()), parts.data(), recv, part, w, wbytes, dt,
                                   op, ch->mhandle, req);
      });
      coll->bytes.push_back(static_cast<int>(wbytes));
    }
    const auto full = Reduced(dt, op, nranks_, per_rank * nranks_, salt);
    auto expected = std::make_shared<std::vector<uint8_t>>(full.begin() + own, full.begin() + own + part);
    coll->check = [out, expected, name = coll->name] {
      EXPECT_EQ(0, std::memcmp(out, expected->data(), expected->size())) << name;
    };
    ch->work.push_back(std::move(coll));
  }

  // NCCL's all-gather of `part` bytes per rank in windows of `window` bytes (0: one window).
  void AddAllGather(Channel* ch, size_t part, size_t window, bool in_place, uint32_t salt) {
    const size_t all = part * nranks_;
    const size_t own = part * rank_;
    uint8_t* out = ch->arena->Take(all);
    std::memset(out, 0xcc, all);
    uint8_t* mine = in_place ? out + own : ch->arena->Take(part);
    for (size_t i = 0; i < part; ++i) mine[i] = GatherByte(rank_, i, salt);
    auto coll = std::make_unique<Collective>();
    coll->name = "allgather " + std::to_string(part) + " bytes per rank, window " + std::to_string(window) +
                 (in_place ? " in place" : "");
    const size_t step = window == 0 ? all : window;
    int k = 0;
    for (size_t w = 0; w < all; w += step, ++k) {
      const size_t wbytes = std::min(step, all - w);
      std::vector<typename V::Sge> parts;
      if (k % 2 == 1 && wbytes > 1) {
        parts.push_back({ch->mhandle, out + w, wbytes / 2});
        parts.push_back({ch->mhandle, out + w + wbytes / 2, wbytes - wbytes / 2});
      } else {
        parts.push_back({ch->mhandle, out + w, wbytes});
      }
      uint8_t* send = mine + std::min(std::max(w, own) - own, part);
      coll->calls.push_back([this, ch, send, parts, part, w, wbytes](void** req) mutable {
        return cn_->iallgather(ch->comm, send, static_cast<int>(parts.size()), parts.data(), part, w, wbytes,
                               ch->mhandle, req);
      });
      coll->bytes.push_back(static_cast<int>(wbytes));
    }
    auto expected = std::make_shared<std::vector<uint8_t>>(all);
    for (int r = 0; r < nranks_; ++r) {
      for (size_t i = 0; i < part; ++i) (*expected)[r * part + i] = GatherByte(r, i, salt);
    }
    coll->check = [out, expected, name = coll->name] {
      EXPECT_EQ(0, std::memcmp(out, expected->data(), expected->size())) << name;
    };
    ch->work.push_back(std::move(coll));
  }

  // The proxy's progress loop: one thread, every channel in turn; post while fewer than 8
  // requests are in flight (a null request means "not now": retry on the next pass), and
  // test the oldest until it is done.
  void Drive() {
    const auto deadline = Clock::now() + std::chrono::seconds(40);
    bool busy = true;
    while (busy) {
      ASSERT_LT(Clock::now(), deadline) << "collectives did not complete";
      busy = false;
      // A channel that ran ahead waits at the next point the parent is told of.
      const size_t gate =
          told_ < plan_.tell_parent_at.size() ? plan_.tell_parent_at[told_] + kStepsPerChannel : SIZE_MAX;
      for (auto& ch : channels_) {
        while (ch.inflight.size() < kStepsPerChannel && ch.next_coll < ch.work.size() && ch.next_coll < gate) {
          Collective* coll = ch.work[ch.next_coll].get();
          void* req = nullptr;
          ASSERT_EQ(coll->calls[ch.next_call](&req), ncclSuccess) << coll->name;
          if (req == nullptr) {
            ++null_requests_;
            break;
          }
          ++issued_;
          ch.inflight.push_back({coll, ch.next_call, req});
          if (++ch.next_call == coll->calls.size()) ++ch.next_coll, ch.next_call = 0;
        }
        while (!ch.inflight.empty()) {
          InFlight& f = ch.inflight.front();
          int done = 0, size = -1;
          ASSERT_EQ(cn_->test(f.request, &done, &size), ncclSuccess) << f.coll->name;
          if (!done) break;
          EXPECT_EQ(size, f.coll->bytes[f.call]) << f.coll->name;
          if (++f.coll->completed == f.coll->calls.size()) {
            f.coll->check();
            ++ch.completed;
          }
          ch.inflight.pop_front();
        }
        busy = busy || !ch.inflight.empty() || ch.next_coll < ch.work.size();
      }
      const bool all_there = std::all_of(channels_.begin(), channels_.end(), [&](const Channel& ch) {
        return told_ < plan_.tell_parent_at.size() && ch.completed >= plan_.tell_parent_at[told_];
      });
      if (all_there) {
        uint8_t byte = 1;
        EXPECT_TRUE(WriteAll(fd_, &byte, 1)) << "the parent is gone";
        EXPECT_TRUE(ReadAll(fd_, &byte, 1, Clock::now() + std::chrono::seconds(20))) << "no word from the parent";
        ++told_;
      }
    }
  }

  const int rank_, nranks_;
  std::vector<Channel> channels_;
  const int fd_;
  const ProxyPlan plan_;
  typename V::Coll* cn_ = nullptr;
  size_t issued_ = 0, null_requests_ = 0;
  size_t told_ = 0;
};

void RunRank(bool v12, int rank, int nranks, int nchannels, int fd, ProxyPlan plan = {}) {
  if (v12) {
    ProxyRank<V12>(rank, nranks, nchannels, fd, std::move(plan)).Run();
  } else {
    ProxyRank<V11>(rank, nranks, nchannels, fd, std::move(plan)).Run();
  }
}

// Forks `nranks` proxy ranks over `servers`, rank 1 on the v12 tables and the others on v11 (as
// nodes on different NCCL releases would be), each running the plan `plan_of` gives it.
std::vector<Child> ForkProxyRanks(const ServerProcesses& servers, int nranks, int nchannels,
                                  const std::function<ProxyPlan(int rank)>& plan_of) {
  std::vector<Child> ranks;
  for (int r = 0; r < nranks; ++r) {
    const std::string name = "rank " + std::to_string(r);
    ranks.push_back(Fork(name, [&, r, name](int fd) {
      setenv("OPTCAST_SERVERS", servers.addresses().c_str(), 1);
      setenv("OPTCAST_TIMEOUT_MS", "20000", 1);
      return ChildBody(name, [&] { RunRank(r == 1, r, nranks, nchannels, fd, plan_of(r)); });
    }));
  }
  return ranks;
}

// Three processes, three channels each, two reduction servers.
TEST(ProxyDriver, ProcessesChannelsEveryTypeAndOperator) {
  ServerProcesses servers(2);
  constexpr int kRanks = 3, kChannels = 3;
  std::vector<Child> ranks = ForkProxyRanks(servers, kRanks, kChannels, [](int) { return ProxyPlan{}; });
  const auto deadline = Clock::now() + kChildLimit;
  EXPECT_TRUE(AllGatherThroughParent(ranks, kChannels * kHandle, deadline));
  ExpectExits(ranks, std::vector<int>(kRanks, 0), deadline);
}

// Three ranks, two channels each, over three servers; the first server is SIGKILLed while each
// channel has its requests in flight, then the third: every request completes normally and every
// collective's result is exact, on the one server left.
TEST(ProxyFailover, KillingOneThenASecondOfThreeServersLosesNoCollective) {
  ServerProcesses servers(3);
  constexpr int kRanks = 3, kChannels = 2;
  std::vector<Child> ranks = ForkProxyRanks(servers, kRanks, kChannels, [](int r) {
    ProxyPlan plan;
    plan.arena_bytes = 40u << 20;
    plan.large_allreduces = 24;
    plan.failovers_expected = true;
    // Of 113 collectives per channel: the first kill after 30, the second after 75.
    if (r == 0) plan.tell_parent_at = {30, 75};
    return plan;
  });
  const auto deadline = Clock::now() + kChildLimit;
  EXPECT_TRUE(AllGatherThroughParent(ranks, kChannels * kHandle, deadline));
  for (int victim : {0, 2}) {
    uint8_t byte = 0;
    if (!ReadAll(ranks[0].fd, &byte, 1, deadline)) {
      ADD_FAILURE() << "rank 0 never reached the point to kill server " << victim;
      break;
    }
    servers.Kill(victim);
    (void)WriteAll(ranks[0].fd, &byte, 1);  // rank 0 goes on, its requests in flight meanwhile
  }
  ExpectExits(ranks, std::vector<int>(kRanks, 0), deadline);
}

// ---- failures: each ends in an error and a WARN that says what to do, never a hang or abort ----

// Runs `body` in one child (fresh plugin, fresh logger) and expects it to pass.
void InOneChild(const std::string& name, const std::function<void()>& body) {
  std::vector<Child> kids{Fork(name, [&](int) { return ChildBody(name, body); })};
  ExpectExits(kids, {0}, Clock::now() + kChildLimit);
}

// The plugin as NCCL 2.28 initializes it in one process (net, then CollNet from the same
// library) and finalizes it.
struct Plugin {
  ncclNet_v11_t* net = Table<ncclNet_v11_t>("ncclNetPlugin_v11");
  ncclCollNet_v11_t* cn = Table<ncclCollNet_v11_t>("ncclCollNetPlugin_v11");
  void* net_ctx = nullptr;
  void* ctx = nullptr;

  Plugin() {
    ncclNetCommConfig_v11_t config{-1};
    EXPECT_EQ(net->init(&net_ctx, 1, &config, TestLogger, nullptr), ncclSuccess);
    int ndev = 0;
    EXPECT_EQ(net->devices(&ndev), ncclSuccess);
    EXPECT_GE(ndev, 1) << "point-to-point works whatever CollNet does";
    EXPECT_EQ(cn->init(&ctx, 1, TestLogger), ncclSuccess);
  }
  ~Plugin() {
    EXPECT_EQ(cn->finalize(ctx), ncclSuccess);
    EXPECT_EQ(net->finalize(net_ctx), ncclSuccess);
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
};

// A collComm of one rank (no handle exchange needed), or null with the connect result.
void* ConnectAlone(ncclCollNet_v11_t* cn, void* ctx, ncclResult_t* rc) {
  char handle[kHandle];
  void* listen = nullptr;
  EXPECT_EQ(cn->listen(ctx, 0, handle, &listen), ncclSuccess);
  void* handles[1] = {handle};
  void* comm = nullptr;
  *rc = cn->connect(handles, 1, 0, listen, &comm);
  EXPECT_EQ(cn->closeListen(listen), ncclSuccess);
  return comm;
}

TEST(ProxyErrors, NoServersMeansNoCollNetDeviceAndAWarning) {
  InOneChild("no servers", [] {
    unsetenv("OPTCAST_SERVERS");
    Plugin p;
    auto* cn = p.cn;
    void* ctx = p.ctx;
    int ndev = -1;
    EXPECT_EQ(cn->devices(&ndev), ncclSuccess);
    EXPECT_EQ(ndev, 0) << "NCCL must see no CollNet device";
    EXPECT_TRUE(Warned({"OPTCAST_SERVERS is not set; CollNet disabled", "Set OPTCAST_SERVERS=host:port"}));
    // Were NCCL to connect anyway, it gets an error, not a crash.
    ncclResult_t rc = ncclSuccess;
    EXPECT_EQ(ConnectAlone(cn, ctx, &rc), nullptr);
    EXPECT_EQ(rc, ncclInvalidUsage);
    EXPECT_TRUE(Warned({"OPTCAST_SERVERS is not set", "in every process"}));
  });
}

TEST(ProxyErrors, MalformedServersMeansNoCollNetDeviceAndAWarning) {
  InOneChild("malformed servers", [] {
    setenv("OPTCAST_SERVERS", "10.0.0.1:8918,10.0.0.2:http", 1);
    Plugin p;
    auto* cn = p.cn;
    int ndev = -1;
    EXPECT_EQ(cn->devices(&ndev), ncclSuccess);
    EXPECT_EQ(ndev, 0);
    EXPECT_TRUE(Warned(
        {"OPTCAST_SERVERS='10.0.0.1:8918,10.0.0.2:http' is not usable", "10.0.0.2:http", "Write it as host:port"}));
  });
}

TEST(ProxyErrors, ServerDownFailsConnectWithinTheConnectTimeout) {
  ServerProcesses servers(1);
  const std::string dead = "127.0.0.1:" + std::to_string(DeadPort());
  InOneChild("server down", [&] {
    setenv("OPTCAST_SERVERS", (servers.Address(0) + "," + dead).c_str(), 1);
    setenv("OPTCAST_CONNECT_TIMEOUT_MS", "800", 1);
    Plugin p;
    auto* cn = p.cn;
    void* ctx = p.ctx;
    int ndev = 0;
    EXPECT_EQ(cn->devices(&ndev), ncclSuccess);
    EXPECT_EQ(ndev, 1);
    const auto start = Clock::now();
    ncclResult_t rc = ncclSuccess;
    EXPECT_EQ(ConnectAlone(cn, ctx, &rc), nullptr);
    const long long ms = MsSince(start);
    EXPECT_EQ(rc, ncclRemoteError);
    EXPECT_GE(ms, 700) << "gave up before the connect timeout";
    EXPECT_LT(ms, 800 + 4000) << "connect outlived OPTCAST_CONNECT_TIMEOUT_MS";
    EXPECT_TRUE(Warned({"CollNet NOT active", "cannot connect to " + dead, "OPTCAST_CONNECT_TIMEOUT_MS=800",
                        "optcast server --listen"}));
  });
}

// Tests `request` until it ends; returns the result of the last test().
ncclResult_t TestUntilEnd(ncclCollNet_v11_t* cn, void* request, std::chrono::milliseconds limit, int* done) {
  ncclResult_t rc = ncclSuccess;
  *done = 0;
  const bool ended = PollUntil(
      [&] {
        int size = 0;
        rc = cn->test(request, done, &size);
        return rc != ncclSuccess || *done != 0;
      },
      limit);
  EXPECT_TRUE(ended) << "test() neither completed nor failed within " << limit.count() << " ms";
  return rc;
}

TEST(ProxyErrors, WithFailoverOffServerDyingFailsCollectivesPromptly) {
  ServerProcesses servers(2);
  const pid_t victim = servers.pid(1);
  const std::string victim_address = servers.Address(1);
  InOneChild("server dies", [&] {
    setenv("OPTCAST_SERVERS", servers.addresses().c_str(), 1);
    setenv("OPTCAST_TIMEOUT_MS", "30000", 1);  // the failure must come from the lost connection
    setenv("OPTCAST_FAILOVER", "0", 1);
    Plugin p;
    auto* cn = p.cn;
    void* ctx = p.ctx;
    ncclResult_t rc = ncclInternalError;
    void* comm = ConnectAlone(cn, ctx, &rc);
    ASSERT_EQ(rc, ncclSuccess);
    std::vector<float> buf(1 << 20, 1.0f);  // large enough to use both servers
    void* req = nullptr;
    int done = 0;
    ASSERT_EQ(cn->iallreduce(comm, buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, nullptr, nullptr, &req),
              ncclSuccess);
    ASSERT_EQ(TestUntilEnd(cn, req, std::chrono::seconds(20), &done), ncclSuccess);
    ASSERT_EQ(done, 1);
    ASSERT_EQ(::kill(victim, SIGKILL), 0);
    const auto start = Clock::now();
    rc = ncclSuccess;
    for (int i = 0; i < 20 && rc == ncclSuccess; ++i) {  // until a call notices
      req = nullptr;
      rc = cn->iallreduce(comm, buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, nullptr, nullptr, &req);
      if (rc == ncclSuccess && req != nullptr) rc = TestUntilEnd(cn, req, std::chrono::seconds(10), &done);
    }
    EXPECT_EQ(rc, ncclRemoteError);
    EXPECT_LT(MsSince(start), 10000);
    EXPECT_TRUE(Warned({"lost the connection to server " + victim_address, "OPTCAST_SERVERS run"}));
    EXPECT_EQ(cn->closeColl(comm), ncclSuccess);
  });
}

// OPTCAST_WIRE_DTYPE=bf16: NCCL's float32 requests travel as bfloat16 without NCCL knowing. One
// rank's sum is its own input rounded to bfloat16 once (the server folds one source and rounds),
// so every element must be exactly that, not the float32 input; float64 travels as it is.
TEST(ProxyWireDtype, Bf16CarriesFloat32RequestsAsBfloat16) {
  ServerProcesses servers(2);
  InOneChild("bf16 wire", [&] {
    setenv("OPTCAST_SERVERS", servers.addresses().c_str(), 1);
    setenv("OPTCAST_WIRE_DTYPE", "bf16", 1);
    Plugin p;
    auto* cn = p.cn;
    ncclResult_t rc = ncclInternalError;
    void* comm = ConnectAlone(cn, p.ctx, &rc);
    ASSERT_EQ(rc, ncclSuccess);
    std::vector<float> in(1 << 18), out(in.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = 1.0f + static_cast<float>(i % 4096) / 4096.0f;  // 12 bits
    void* req = nullptr;
    int done = 0;
    ASSERT_EQ(cn->iallreduce(comm, in.data(), out.data(), in.size(), ncclFloat32, ncclSum, nullptr, nullptr, &req),
              ncclSuccess);
    ASSERT_EQ(TestUntilEnd(cn, req, std::chrono::seconds(20), &done), ncclSuccess);
    size_t wrong = 0, rounded = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const float want = reduce::BFloat16ToFloat(reduce::FloatToBFloat16(in[i]));
      wrong += out[i] != want;
      rounded += want != in[i];
    }
    EXPECT_EQ(wrong, 0u) << "elements that are not their bfloat16 rounding";
    EXPECT_GT(rounded, in.size() / 2) << "the inputs must need rounding for this to show anything";
    std::vector<double> din(4099, 1.0 + 1e-9), dout(din.size());
    req = nullptr;
    ASSERT_EQ(cn->iallreduce(comm, din.data(), dout.data(), din.size(), ncclFloat64, ncclSum, nullptr, nullptr, &req),
              ncclSuccess);
    ASSERT_EQ(TestUntilEnd(cn, req, std::chrono::seconds(20), &done), ncclSuccess);
    EXPECT_EQ(dout, din) << "float64 travels as it is";
    EXPECT_EQ(cn->closeColl(comm), ncclSuccess);
  });
}

// Failover on (the default): NCCL's requests after the death complete normally, with exact
// results, over the server left.
TEST(ProxyErrors, ServerDyingMidJobFailsOverAndRequestsCompleteNormally) {
  ServerProcesses servers(2);
  const pid_t victim = servers.pid(0);
  InOneChild("server dies, failover", [&] {
    setenv("OPTCAST_SERVERS", servers.addresses().c_str(), 1);
    setenv("OPTCAST_TIMEOUT_MS", "30000", 1);
    Plugin p;
    auto* cn = p.cn;
    void* ctx = p.ctx;
    ncclResult_t rc = ncclInternalError;
    void* comm = ConnectAlone(cn, ctx, &rc);
    ASSERT_EQ(rc, ncclSuccess);
    std::vector<float> in(1 << 20), out(in.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 1000) * 0.25f;
    for (int round = 0; round < 6; ++round) {
      if (round == 2) {
        ASSERT_EQ(::kill(victim, SIGKILL), 0);
      }
      std::fill(out.begin(), out.end(), -1.0f);
      void* req = nullptr;
      int done = 0;
      ASSERT_TRUE(PollUntil([&] {
        EXPECT_EQ(cn->iallreduce(comm, in.data(), out.data(), in.size(), ncclFloat32, ncclSum, nullptr, nullptr, &req),
                  ncclSuccess);
        return req != nullptr;
      }));
      ASSERT_EQ(TestUntilEnd(cn, req, std::chrono::seconds(20), &done), ncclSuccess) << "round " << round;
      ASSERT_EQ(done, 1);
      ASSERT_EQ(std::memcmp(in.data(), out.data(), in.size() * sizeof(float)), 0) << "round " << round;
    }
    EXPECT_EQ(cn->closeColl(comm), ncclSuccess);
  });
}

TEST(ProxyErrors, RankThatNeverJoinsFailsTheOthersWithinTheTimeout) {
  ServerProcesses servers(2);
  constexpr int kRanks = 3;
  std::vector<Child> ranks;
  for (int r = 0; r < kRanks; ++r) {
    const std::string name = "rank " + std::to_string(r);
    ranks.push_back(Fork(name, [&, r, name](int fd) {
      setenv("OPTCAST_SERVERS", servers.addresses().c_str(), 1);
      setenv("OPTCAST_TIMEOUT_MS", "2000", 1);
      return ChildBody(name, [&] {
        Plugin p;
        auto* cn = p.cn;
        void* ctx = p.ctx;
        std::vector<uint8_t> mine(kHandle), all;
        void* listen = nullptr;
        ASSERT_EQ(cn->listen(ctx, 0, mine.data(), &listen), ncclSuccess);
        ASSERT_TRUE(AllGatherHandles(fd, mine, kRanks, &all));
        if (r == kRanks - 1) {  // got the handles, then hangs up without joining
          EXPECT_EQ(cn->closeListen(listen), ncclSuccess);
          return;
        }
        std::vector<void*> handles;
        for (int i = 0; i < kRanks; ++i) handles.push_back(all.data() + i * kHandle);
        void* comm = nullptr;
        ASSERT_EQ(cn->connect(handles.data(), kRanks, r, listen, &comm), ncclSuccess);
        ASSERT_EQ(cn->closeListen(listen), ncclSuccess);
        std::vector<std::vector<int32_t>> bufs(4, std::vector<int32_t>(100001, r));
        std::vector<void*> reqs;
        const auto start = Clock::now();
        for (auto& b : bufs) {  // several in flight; none of these calls may wait for the missing rank
          const auto call = Clock::now();
          void* req = nullptr;
          ASSERT_EQ(cn->iallreduce(comm, b.data(), b.data(), b.size(), ncclInt32, ncclSum, nullptr, nullptr, &req),
                    ncclSuccess);
          ASSERT_NE(req, nullptr);
          EXPECT_LT(MsSince(call), 1000) << "iallreduce blocked";
          reqs.push_back(req);
        }
        int done = 0;
        EXPECT_EQ(TestUntilEnd(cn, reqs[0], std::chrono::seconds(15), &done), ncclRemoteError);
        const long long ms = MsSince(start);
        EXPECT_GE(ms, 1500) << "failed before OPTCAST_TIMEOUT_MS";
        EXPECT_LT(ms, 2000 + 4000) << "failed long after OPTCAST_TIMEOUT_MS";
        // Whichever rank times out first leaves the job, and the server then fails it for the other.
        EXPECT_TRUE(Warned({"CollNet collective failed", "made no progress for 2000 ms", "OPTCAST_TIMEOUT_MS",
                            "optcast server --log-level info"}) ||
                    Warned({"CollNet collective failed", "disconnected during collective #1",
                            "Another rank of this job failed"}));
        // The other requests end in the same error at once, and so does any new call.
        for (size_t i = 1; i < reqs.size(); ++i) {
          EXPECT_EQ(TestUntilEnd(cn, reqs[i], std::chrono::seconds(1), &done), ncclRemoteError);
        }
        void* req = reinterpret_cast<void*>(1);
        EXPECT_EQ(cn->iallreduce(comm, bufs[0].data(), bufs[0].data(), 10, ncclInt32, ncclSum, nullptr, nullptr, &req),
                  ncclRemoteError);
        EXPECT_EQ(req, nullptr);
        const auto close = Clock::now();
        EXPECT_EQ(cn->closeColl(comm), ncclSuccess);
        EXPECT_LT(MsSince(close), 2000);
      });
    }));
  }
  const auto deadline = Clock::now() + kChildLimit;
  EXPECT_TRUE(AllGatherThroughParent(ranks, kHandle, deadline));
  ExpectExits(ranks, std::vector<int>(kRanks, 0), deadline);
}

TEST(ProxyErrors, MismatchedCollectivesFailWithAWarning) {
  ServerProcesses servers(1);
  constexpr int kRanks = 2;
  std::vector<Child> ranks;
  for (int r = 0; r < kRanks; ++r) {
    const std::string name = "rank " + std::to_string(r);
    ranks.push_back(Fork(name, [&, r, name](int fd) {
      setenv("OPTCAST_SERVERS", servers.addresses().c_str(), 1);
      setenv("OPTCAST_TIMEOUT_MS", "20000", 1);
      return ChildBody(name, [&] {
        Plugin p;
        auto* cn = p.cn;
        void* ctx = p.ctx;
        std::vector<uint8_t> mine(kHandle), all;
        void* listen = nullptr;
        ASSERT_EQ(cn->listen(ctx, 0, mine.data(), &listen), ncclSuccess);
        ASSERT_TRUE(AllGatherHandles(fd, mine, kRanks, &all));
        void* handles[kRanks] = {all.data(), all.data() + kHandle};
        void* comm = nullptr;
        ASSERT_EQ(cn->connect(handles, kRanks, r, listen, &comm), ncclSuccess);
        ASSERT_EQ(cn->closeListen(listen), ncclSuccess);
        std::vector<int32_t> buf(1001, 3);
        void* req = nullptr;
        // Rank 0 sums, rank 1 takes the max: a program bug the servers must catch.
        ASSERT_EQ(cn->iallreduce(comm, buf.data(), buf.data(), buf.size(), ncclInt32, r == 0 ? ncclSum : ncclMax,
                                 nullptr, nullptr, &req),
                  ncclSuccess);
        int done = 0;
        EXPECT_EQ(TestUntilEnd(cn, req, std::chrono::seconds(10), &done), ncclInvalidUsage);
        EXPECT_TRUE(Warned({"ranks disagree on collective #1", "reduction op", "Every rank must"}));
        EXPECT_EQ(cn->closeColl(comm), ncclSuccess);
      });
    }));
  }
  const auto deadline = Clock::now() + kChildLimit;
  EXPECT_TRUE(AllGatherThroughParent(ranks, kHandle, deadline));
  ExpectExits(ranks, std::vector<int>(kRanks, 0), deadline);
}

// regMrDmaBuf through one table: refused, no handle, and a WARN that says what to do.
template <typename T>
void ExpectDmaBufRefused(const char* symbol, void* comm) {
  SCOPED_TRACE(symbol);
  auto* t = Table<T>(symbol);
  ASSERT_NE(t, nullptr);
  ASSERT_NE(t->regMrDmaBuf, nullptr);
  std::vector<uint8_t> buf(4096);
  void* mhandle = reinterpret_cast<void*>(1);
  const int before = CountWarnings();
  EXPECT_EQ(t->regMrDmaBuf(comm, buf.data(), buf.size(), kPtrCuda, 0, 42, &mhandle), ncclInternalError);
  EXPECT_EQ(mhandle, nullptr);
  EXPECT_EQ(CountWarnings(), before + 1);
}

TEST(ProxyErrors, DmaBufAndGpuMemoryAreRefusedWithAWarning) {
  ServerProcesses servers(1);
  InOneChild("dmabuf", [&] {
    setenv("OPTCAST_SERVERS", servers.addresses().c_str(), 1);
    Plugin p;
    auto* cn = p.cn;
    void* ctx = p.ctx;
    ncclNetProperties_v11_t props{};
    ASSERT_EQ(cn->getProperties(0, &props), ncclSuccess);
    EXPECT_EQ(props.ptrSupport & kPtrDmaBuf, 0) << "NCCL only calls regMrDmaBuf when this bit is set";
    ncclResult_t rc = ncclInternalError;
    void* comm = ConnectAlone(cn, ctx, &rc);
    ASSERT_EQ(rc, ncclSuccess);
    std::vector<uint8_t> buf(4096);
    void* mhandle = reinterpret_cast<void*>(1);
    EXPECT_EQ(cn->regMrDmaBuf(comm, buf.data(), buf.size(), kPtrCuda, 0, 42, &mhandle), ncclInternalError);
    EXPECT_EQ(mhandle, nullptr);
    EXPECT_TRUE(Warned({"regMrDmaBuf of 4096 bytes", "fd 42", "does not support DMA-BUF", "NCCL_DMABUF_ENABLE=0"}));
    mhandle = reinterpret_cast<void*>(1);
    EXPECT_EQ(cn->regMr(comm, buf.data(), buf.size(), kPtrCuda, &mhandle), ncclInternalError);
    EXPECT_EQ(mhandle, nullptr);
    EXPECT_TRUE(
        Warned({"regMr of 4096 bytes with pointer type 2 refused", "host memory only", "NCCL_NET_GDR_LEVEL=LOC"}));
    // Host memory still registers after the refusals.
    ASSERT_EQ(cn->regMr(comm, buf.data(), buf.size(), kPtrHost, &mhandle), ncclSuccess);
    EXPECT_EQ(cn->deregMr(comm, mhandle), ncclSuccess);
    // Every table that has the entry point refuses the same way.
    ExpectDmaBufRefused<ncclNet_v6_t>("ncclNetPlugin_v6", nullptr);
    ExpectDmaBufRefused<ncclNet_v7_t>("ncclNetPlugin_v7", nullptr);
    ExpectDmaBufRefused<ncclNet_v8_t>("ncclNetPlugin_v8", nullptr);
    ExpectDmaBufRefused<ncclNet_v9_t>("ncclNetPlugin_v9", nullptr);
    ExpectDmaBufRefused<ncclNet_v10_t>("ncclNetPlugin_v10", nullptr);
    ExpectDmaBufRefused<ncclNet_v11_t>("ncclNetPlugin_v11", nullptr);
    ExpectDmaBufRefused<ncclNet_v12_t>("ncclNetPlugin_v12", nullptr);
    ExpectDmaBufRefused<ncclCollNet_v6_t>("ncclCollNetPlugin_v6", comm);
    ExpectDmaBufRefused<ncclCollNet_v7_t>("ncclCollNetPlugin_v7", comm);
    ExpectDmaBufRefused<ncclCollNet_v8_t>("ncclCollNetPlugin_v8", comm);
    ExpectDmaBufRefused<ncclCollNet_v9_t>("ncclCollNetPlugin_v9", comm);
    ExpectDmaBufRefused<ncclCollNet_v10_t>("ncclCollNetPlugin_v10", comm);
    ExpectDmaBufRefused<ncclCollNet_v12_t>("ncclCollNetPlugin_v12", comm);
    EXPECT_EQ(cn->closeColl(comm), ncclSuccess);
  });
}

}  // namespace
}  // namespace optcast::nccl::test
