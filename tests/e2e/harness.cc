// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "reduce/half.h"

namespace optcast::e2e {

// ---------------------------------------------------------------------------------------------
// Servers

server::ServerOptions TestServerOptions() {
  server::ServerOptions o;
  o.listen = {"127.0.0.1", 0};
  o.job_timeout = milliseconds(10000);
  o.hello_timeout = milliseconds(10000);
  if (Status st = transport::KindFromEnvironment(transport::Kind::kTcp, &o.transport.kind); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    std::abort();
  }
  return o;
}

bool OverFabric() {
  transport::Kind k = transport::Kind::kTcp;
  return transport::KindFromEnvironment(transport::Kind::kTcp, &k).ok() && k == transport::Kind::kOfi;
}

ServerFarm::~ServerFarm() { Stop(); }

Status ServerFarm::Bind(int n, server::ServerOptions options) {
  for (int i = 0; i < n; ++i) {
    auto s = std::make_unique<server::Server>(options);
    OPTCAST_RETURN_IF_ERROR(s->Start());
    servers_.push_back(std::move(s));
  }
  return Status::Ok();
}

Status ServerFarm::Start(int n, server::ServerOptions options) {
  OPTCAST_RETURN_IF_ERROR(Bind(n, std::move(options)));
  Serve();
  return Status::Ok();
}

void ServerFarm::Serve() {
  for (auto& s : servers_) {
    server::Server* raw = s.get();
    threads_.emplace_back([raw] {
      Status st = raw->Run();
      if (!st.ok()) std::fprintf(stderr, "server loop ended: %s\n", st.ToString().c_str());
    });
  }
}

void ServerFarm::Stop() {
  for (auto& s : servers_) s->Stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  servers_.clear();
}

std::vector<std::string> ServerFarm::addresses() const {
  std::vector<std::string> a;
  for (const auto& s : servers_) a.push_back("127.0.0.1:" + std::to_string(s->port()));
  return a;
}

std::string ServerFarm::WaitIdle(milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    std::string busy;
    for (int i = 0; i < size(); ++i) {
      const server::ServerStats st = servers_[i]->stats();
      if (st.jobs_active != 0 || st.buffer_bytes_outstanding != 0 || st.connections != 0) {
        busy += "server " + std::to_string(i) + ": jobs_active=" + std::to_string(st.jobs_active) +
                " buffer_bytes_outstanding=" + std::to_string(st.buffer_bytes_outstanding) +
                " connections=" + std::to_string(st.connections) + "; ";
      }
    }
    if (busy.empty()) return "";
    if (Clock::now() >= deadline) return busy;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

// ---------------------------------------------------------------------------------------------
// Shared memory

Shared::Shared() {
  void* p = mmap(nullptr, sizeof(SharedState), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::abort();
  }
  std::memset(p, 0, sizeof(SharedState));
  state_ = new (p) SharedState;
  for (auto& b : state_->barrier) b.store(0);
  for (auto& f : state_->flag) f.store(0);
  state_->stop.store(0);
  state_->port.store(0);
  static_assert(std::atomic<int>::is_always_lock_free, "process-shared atomics must be lock-free");
}

Shared::~Shared() {
  state_->~SharedState();
  munmap(state_, sizeof(SharedState));
}

void Shared::Note(int slot, const std::string& message) {
  std::snprintf(state_->msg[slot], sizeof(state_->msg[slot]), "%s", message.c_str());
}

int Shared::Fail(int slot, const std::string& message) {
  Note(slot, message);
  std::fprintf(stderr, "[child %d pid %d] FAILED: %s\n", slot, static_cast<int>(getpid()), message.c_str());
  return 1;
}

std::string Shared::Message(int slot) const {
  return std::string(state_->msg[slot], strnlen(state_->msg[slot], sizeof(state_->msg[slot])));
}

bool Shared::Barrier(int id, int n, milliseconds limit) {
  state_->barrier[id].fetch_add(1);
  const auto deadline = Clock::now() + limit;
  while (state_->barrier[id].load() < n) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------------------------
// Children

std::string ChildResult::Describe() const {
  if (timed_out) return "pid " + std::to_string(pid) + " timed out and was killed";
  if (exited) return "pid " + std::to_string(pid) + " exited with " + std::to_string(exit_code);
  if (signal != 0) return "pid " + std::to_string(pid) + " killed by signal " + std::to_string(signal);
  return "pid " + std::to_string(pid) + " has not ended";
}

Children::Children() {
  void* p = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::abort();
  }
  gate_ = new (p) std::atomic<int>(0);
}

Children::~Children() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (reaped_[i]) continue;
    ::kill(pids_[i], SIGKILL);
    int status = 0;
    ::waitpid(pids_[i], &status, 0);
  }
  munmap(gate_, sizeof(std::atomic<int>));
}

void Children::Start() { gate_->store(1); }

int Children::Spawn(std::function<int()> body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("fork");
    std::abort();
  }
  if (pid == 0) {
    const auto give_up = Clock::now() + milliseconds(60000);
    while (gate_->load() == 0) {
      if (Clock::now() > give_up) ::_exit(96);
      std::this_thread::sleep_for(milliseconds(1));
    }
    int rc = 97;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[child pid %d] exception: %s\n", static_cast<int>(getpid()), e.what());
      rc = 98;
    } catch (...) {
      std::fprintf(stderr, "[child pid %d] unknown exception\n", static_cast<int>(getpid()));
      rc = 98;
    }
    std::fflush(stderr);
    ::_exit(rc);
  }
  pids_.push_back(pid);
  results_.push_back(ChildResult{pid});
  reaped_.push_back(false);
  return static_cast<int>(pids_.size()) - 1;
}

namespace {
void Record(ChildResult* r, int status) {
  if (WIFEXITED(status)) {
    r->exited = true;
    r->exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r->signal = WTERMSIG(status);
  }
}
}  // namespace

ChildResult Children::Wait(int i, milliseconds limit) {
  Start();
  const auto deadline = Clock::now() + limit;
  for (;;) {
    const ChildResult now = Peek(i);
    if (reaped_[i]) return now;
    if (Clock::now() >= deadline) {
      int status = 0;
      ::kill(pids_[i], SIGKILL);
      ::waitpid(pids_[i], &status, 0);
      Record(&results_[i], status);
      results_[i].timed_out = true;
      reaped_[i] = true;
      return results_[i];
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
}

std::vector<ChildResult> Children::WaitAll(milliseconds limit) {
  Start();
  const auto deadline = Clock::now() + limit;
  for (size_t i = 0; i < pids_.size(); ++i) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    Wait(static_cast<int>(i), std::max(left, milliseconds(0)));
  }
  return results_;
}

void Children::Kill(int i, int sig) {
  Start();
  if (!reaped_[i]) ::kill(pids_[i], sig);
}

ChildResult Children::Peek(int i) {
  if (reaped_[i]) return results_[i];
  int status = 0;
  if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
    Record(&results_[i], status);
    reaped_[i] = true;
  }
  return results_[i];
}

// ---------------------------------------------------------------------------------------------
// Ranks

namespace {
uint16_t PortOf(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}
}  // namespace

void ForEachConnectionTo(const std::vector<uint16_t>& ports,
                         const std::function<void(int fd, const std::string& key)>& visit) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    const int fd = atoi(e->d_name);
    struct stat st {};
    if (e->d_name[0] == '.' || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t llen = sizeof(local), plen = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;  // listeners, unconnected
    const uint16_t lp = PortOf(local), pp = PortOf(peer);
    if (std::any_of(ports.begin(), ports.end(), [&](uint16_t p) { return p == lp || p == pp; })) {
      visit(fd, std::to_string(lp) + "->" + std::to_string(pp));
    }
  }
  closedir(dir);
}

Status MakeComm(const std::vector<std::string>& servers, const JobId& job, int nranks, int rank,
                const CommConfig& config, std::unique_ptr<Communicator>* out) {
  CommunicatorOptions o;
  o.servers = servers;
  o.job_id = job;
  o.nranks = nranks;
  o.rank = rank;
  o.timeout = config.timeout;
  o.connect_timeout = config.connect_timeout;
  o.chunk_bytes = config.chunk_bytes;
  o.window = config.window;
  o.secret = config.secret;
  o.failover = config.failover;
  o.heartbeat = config.heartbeat;
  o.tcp_congestion = config.tcp_congestion;
  o.latency_bytes = config.latency_bytes;
  o.latency_dscp = config.latency_dscp;
  o.wire_dtype = config.wire_dtype;
  return Communicator::Create(o, out);
}

void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

bool WaitFor(const std::function<bool()>& cond, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!cond()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

std::vector<Status> RunRanksOnThreads(const std::vector<std::string>& servers, int nranks, const CommConfig& config,
                                      const std::function<Status(int rank, Communicator& comm)>& body) {
  const JobId job = JobId::Random();
  std::vector<Status> out(nranks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < nranks; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm;
      out[r] = MakeComm(servers, job, nranks, r, config, &comm);
      if (out[r].ok()) out[r] = body(r, *comm);
    });
  }
  for (auto& t : ranks) t.join();
  return out;
}

std::vector<Status> RunAllReduceOnThreads(const std::vector<std::string>& servers, int nranks, size_t count,
                                          const CommConfig& config, uint64_t seed) {
  return RunRanksOnThreads(servers, nranks, config, [&](int r, Communicator& comm) {
    std::vector<float> in(count), got(count);
    FillInput(DataType::kFloat32, RedOp::kSum, seed, r, 0, count, in.data());
    Status st = comm.AllReduce(in.data(), got.data(), count, DataType::kFloat32, RedOp::kSum);
    if (st.ok()) {
      const std::string err = VerifyReduction(got.data(), DataType::kFloat32, RedOp::kSum, seed, nranks, 0, count);
      if (!err.empty()) st = InternalError("wrong result: " + err);
    }
    return st;
  });
}

// ---------------------------------------------------------------------------------------------
// Data

namespace {

inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t Bits(uint64_t seed, int rank, uint64_t index) {
  return Mix64(seed + static_cast<uint64_t>(rank) * 0xd1b54a32d192ed03ull + index * 0x8cb92ba72f3d8dd7ull);
}

// 2^-k, exact, for scaling integer mantissas without a libm call.
struct NegPow2 {
  float f[64];
  double d[80];
  NegPow2() {
    for (int k = 0; k < 64; ++k) f[k] = std::ldexp(1.0f, -k);
    for (int k = 0; k < 80; ++k) d[k] = std::ldexp(1.0, -k);
  }
};
const NegPow2 kPow2;

// float32/float64 inputs: random mantissas over several binades, so that the order of
// combination matters in the last bit; occasional signed zeros. Products stay within 1 +- 1/64.
float GenF32(uint64_t h, RedOp op) {
  const auto s = static_cast<int32_t>(static_cast<int64_t>(h >> 40) - (int64_t{1} << 23));  // 24 bits
  if (op == RedOp::kProd) return 1.0f + static_cast<float>(s) * kPow2.f[29];
  if ((h & 0xff) == 0) return (h & 0x100) ? -0.0f : 0.0f;
  return static_cast<float>(s) * kPow2.f[20 + (h & 15)];
}

double GenF64(uint64_t h, RedOp op) {
  const auto s = static_cast<int64_t>(h >> 11) - (int64_t{1} << 52);  // 53 bits
  if (op == RedOp::kProd) return 1.0 + static_cast<double>(s) * kPow2.d[58];
  if ((h & 0x7f0) == 0) return (h & 0x800) ? -0.0 : 0.0;
  return static_cast<double>(s) * kPow2.d[49 + (h & 15)];
}

// 16-bit floats: values within +-8 (sums of a few ranks stay finite), products within 1 +- 1/16.
float GenSmall(uint64_t h, RedOp op) {
  const auto s = static_cast<int32_t>(static_cast<int64_t>(h >> 40) - (int64_t{1} << 23));
  if (op == RedOp::kProd) return 1.0f + static_cast<float>(s) * kPow2.f[27];
  if ((h & 0xff) == 0) return (h & 0x100) ? -0.0f : 0.0f;
  return static_cast<float>(s) * kPow2.f[20 + (h & 7)];
}

template <typename A>
A ApplyOp(RedOp op, A acc, A v) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return static_cast<A>(acc + v);
    case RedOp::kProd: return static_cast<A>(acc * v);
    case RedOp::kMin: return acc < v ? acc : v;
    case RedOp::kMax: return acc > v ? acc : v;
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor:
      if constexpr (std::is_integral_v<A>) {
        return static_cast<A>(op == RedOp::kBand ? (acc & v) : op == RedOp::kBor ? (acc | v) : (acc ^ v));
      }
      break;  // bitwise ops on floats are refused before anything is sent
  }
  return acc;
}

template <typename T>
void FillIntInput(uint64_t seed, int rank, uint64_t first, size_t n, T* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(Bits(seed, rank, first + i));
}

template <typename T>
void FillIntReference(RedOp op, uint64_t seed, int nranks, uint64_t first, size_t n, T* out) {
  using U = std::make_unsigned_t<T>;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t idx = first + i;
    if (op == RedOp::kAvg) {
      uint64_t sum = 0;  // 64-bit wrapping sum of the sign- or zero-extended values
      for (int r = 0; r < nranks; ++r) sum += static_cast<uint64_t>(static_cast<T>(Bits(seed, r, idx)));
      if constexpr (std::is_signed_v<T>) {
        out[i] = static_cast<T>(static_cast<int64_t>(sum) / static_cast<int64_t>(nranks));
      } else {
        out[i] = static_cast<T>(sum / static_cast<uint64_t>(nranks));
      }
      continue;
    }
    if (op == RedOp::kSum || op == RedOp::kProd) {
      U acc = static_cast<U>(Bits(seed, 0, idx));
      for (int r = 1; r < nranks; ++r) {
        const U v = static_cast<U>(Bits(seed, r, idx));
        // Multiply in at least `unsigned` so that narrow types do not promote to signed int.
        if (op == RedOp::kSum) {
          acc = static_cast<U>(acc + v);
        } else {
          using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
          acc = static_cast<U>(static_cast<W>(acc) * static_cast<W>(v));
        }
      }
      out[i] = static_cast<T>(acc);
      continue;
    }
    T acc = static_cast<T>(Bits(seed, 0, idx));
    for (int r = 1; r < nranks; ++r) acc = ApplyOp<T>(op, acc, static_cast<T>(Bits(seed, r, idx)));
    out[i] = acc;
  }
}

}  // namespace

void FillInput(DataType dtype, RedOp op, uint64_t seed, int rank, uint64_t first, size_t n, void* out) {
  switch (dtype) {
    case DataType::kFloat32: {
      auto* o = static_cast<float*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = GenF32(Bits(seed, rank, first + i), op);
      return;
    }
    case DataType::kFloat64: {
      auto* o = static_cast<double*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = GenF64(Bits(seed, rank, first + i), op);
      return;
    }
    case DataType::kFloat16: {
      auto* o = static_cast<uint16_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = reduce::FloatToHalf(GenSmall(Bits(seed, rank, first + i), op));
      return;
    }
    case DataType::kBFloat16: {
      auto* o = static_cast<uint16_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = reduce::FloatToBFloat16(GenSmall(Bits(seed, rank, first + i), op));
      return;
    }
    case DataType::kInt8: return FillIntInput(seed, rank, first, n, static_cast<int8_t*>(out));
    case DataType::kUInt8: return FillIntInput(seed, rank, first, n, static_cast<uint8_t*>(out));
    case DataType::kInt32: return FillIntInput(seed, rank, first, n, static_cast<int32_t*>(out));
    case DataType::kUInt32: return FillIntInput(seed, rank, first, n, static_cast<uint32_t*>(out));
    case DataType::kInt64: return FillIntInput(seed, rank, first, n, static_cast<int64_t*>(out));
    case DataType::kUInt64: return FillIntInput(seed, rank, first, n, static_cast<uint64_t*>(out));
  }
}

void FillReference(DataType dtype, RedOp op, uint64_t seed, int nranks, uint64_t first, size_t n, void* out) {
  switch (dtype) {
    case DataType::kFloat32: {
      auto* o = static_cast<float*>(out);
      for (size_t i = 0; i < n; ++i) {
        float acc = GenF32(Bits(seed, 0, first + i), op);
        for (int r = 1; r < nranks; ++r) acc = ApplyOp<float>(op, acc, GenF32(Bits(seed, r, first + i), op));
        o[i] = op == RedOp::kAvg ? acc / static_cast<float>(nranks) : acc;
      }
      return;
    }
    case DataType::kFloat64: {
      auto* o = static_cast<double*>(out);
      for (size_t i = 0; i < n; ++i) {
        double acc = GenF64(Bits(seed, 0, first + i), op);
        for (int r = 1; r < nranks; ++r) acc = ApplyOp<double>(op, acc, GenF64(Bits(seed, r, first + i), op));
        o[i] = op == RedOp::kAvg ? acc / static_cast<double>(nranks) : acc;
      }
      return;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const bool half = dtype == DataType::kFloat16;
      // Each rank's element as the server sees it: rounded to 16 bits, widened to float32.
      auto widen = [&](int r, uint64_t idx) {
        const float f = GenSmall(Bits(seed, r, idx), op);
        return half ? reduce::HalfToFloat(reduce::FloatToHalf(f)) : reduce::BFloat16ToFloat(reduce::FloatToBFloat16(f));
      };
      auto* o = static_cast<uint16_t*>(out);
      for (size_t i = 0; i < n; ++i) {
        float acc = widen(0, first + i);
        for (int r = 1; r < nranks; ++r) acc = ApplyOp<float>(op, acc, widen(r, first + i));
        if (op == RedOp::kAvg) acc = acc / static_cast<float>(nranks);
        o[i] = half ? reduce::FloatToHalf(acc) : reduce::FloatToBFloat16(acc);  // rounded once
      }
      return;
    }
    case DataType::kInt8: return FillIntReference(op, seed, nranks, first, n, static_cast<int8_t*>(out));
    case DataType::kUInt8: return FillIntReference(op, seed, nranks, first, n, static_cast<uint8_t*>(out));
    case DataType::kInt32: return FillIntReference(op, seed, nranks, first, n, static_cast<int32_t*>(out));
    case DataType::kUInt32: return FillIntReference(op, seed, nranks, first, n, static_cast<uint32_t*>(out));
    case DataType::kInt64: return FillIntReference(op, seed, nranks, first, n, static_cast<int64_t*>(out));
    case DataType::kUInt64: return FillIntReference(op, seed, nranks, first, n, static_cast<uint64_t*>(out));
  }
}

std::string ValueString(DataType dtype, const void* p) {
  char buf[96];
  switch (dtype) {
    case DataType::kFloat32: {
      float f;
      uint32_t b;
      std::memcpy(&f, p, 4);
      std::memcpy(&b, p, 4);
      std::snprintf(buf, sizeof(buf), "%.9g (0x%08x)", f, b);
      break;
    }
    case DataType::kFloat64: {
      double f;
      uint64_t b;
      std::memcpy(&f, p, 8);
      std::memcpy(&b, p, 8);
      std::snprintf(buf, sizeof(buf), "%.17g (0x%016" PRIx64 ")", f, b);
      break;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      const float f = dtype == DataType::kFloat16 ? reduce::HalfToFloat(b) : reduce::BFloat16ToFloat(b);
      std::snprintf(buf, sizeof(buf), "%.6g (0x%04x)", f, b);
      break;
    }
    case DataType::kInt8: std::snprintf(buf, sizeof(buf), "%d", *static_cast<const int8_t*>(p)); break;
    case DataType::kUInt8: std::snprintf(buf, sizeof(buf), "%u", *static_cast<const uint8_t*>(p)); break;
    case DataType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      std::snprintf(buf, sizeof(buf), "%d", v);
      break;
    }
    case DataType::kUInt32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      std::snprintf(buf, sizeof(buf), "%u", v);
      break;
    }
    case DataType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      std::snprintf(buf, sizeof(buf), "%" PRId64, v);
      break;
    }
    case DataType::kUInt64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      std::snprintf(buf, sizeof(buf), "%" PRIu64, v);
      break;
    }
  }
  return buf;
}

namespace {
constexpr size_t kVerifyBlock = 1 << 16;

std::string FirstDifference(const uint8_t* got, const uint8_t* want, size_t n, DataType dtype, uint64_t first,
                            const std::string& what) {
  const size_t es = DataTypeSize(dtype);
  size_t bad = 0, first_bad = n;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(got + i * es, want + i * es, es) != 0) {
      if (first_bad == n) first_bad = i;
      ++bad;
    }
  }
  return what + ": " + std::to_string(bad) + " of the " + std::to_string(n) + " elements from " +
         std::to_string(first) + " differ; first at element " + std::to_string(first + first_bad) + ": got " +
         ValueString(dtype, got + first_bad * es) + ", want " + ValueString(dtype, want + first_bad * es);
}
}  // namespace

std::string VerifyReduction(const void* got, DataType dtype, RedOp op, uint64_t seed, int nranks, uint64_t first,
                            size_t n) {
  const size_t es = DataTypeSize(dtype);
  std::vector<uint8_t> want(kVerifyBlock * es);
  const auto* g = static_cast<const uint8_t*>(got);
  for (size_t off = 0; off < n; off += kVerifyBlock) {
    const size_t len = std::min(kVerifyBlock, n - off);
    FillReference(dtype, op, seed, nranks, first + off, len, want.data());
    if (std::memcmp(g + off * es, want.data(), len * es) != 0) {
      return FirstDifference(g + off * es, want.data(), len, dtype, first + off,
                             std::string(RedOpName(op)) + " of " + DataTypeName(dtype));
    }
  }
  return "";
}

std::string VerifyAllGather(const void* got, DataType dtype, uint64_t seed, int nranks, size_t sendcount) {
  const size_t es = DataTypeSize(dtype);
  std::vector<uint8_t> want(kVerifyBlock * es);
  const auto* g = static_cast<const uint8_t*>(got);
  for (int q = 0; q < nranks; ++q) {
    for (size_t off = 0; off < sendcount; off += kVerifyBlock) {
      const size_t len = std::min(kVerifyBlock, sendcount - off);
      FillInput(dtype, RedOp::kSum, seed, q, off, len, want.data());
      const uint8_t* at = g + (static_cast<size_t>(q) * sendcount + off) * es;
      if (std::memcmp(at, want.data(), len * es) != 0) {
        return FirstDifference(
            at, want.data(), len, dtype, off,
            std::string("allgather of ") + DataTypeName(dtype) + ", part of rank " + std::to_string(q));
      }
    }
  }
  return "";
}

uint64_t HashBytes(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = Mix64(h ^ w);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  return Mix64(h ^ tail ^ (static_cast<uint64_t>(n) << 56));
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

GuardedBuffer::GuardedBuffer(size_t bytes) : bytes_(bytes), storage_(bytes + 2 * kGuard, 0xa5) {}

bool GuardedBuffer::GuardsIntact() const {
  for (size_t i = 0; i < kGuard; ++i) {
    if (storage_[i] != 0xa5 || storage_[kGuard + bytes_ + i] != 0xa5) return false;
  }
  return true;
}

}  // namespace optcast::e2e
