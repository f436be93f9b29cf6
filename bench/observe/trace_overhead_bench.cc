// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// What timeline tracing costs. Two figures, each against a baseline measured in the same run:
//  1. A trace hook while tracing is off (what every chunk pays in production) against an empty
//     loop, and the hooks one chunk passes through against the time to reduce one 64 KiB chunk.
//  2. AllReduce through a real server on loopback (2 ranks on one thread) with tracing off, on,
//     and off again (the noise floor), interleaved so drifting machine load hits all alike.
//
//   ./build/bench/observe/optcast_trace_overhead_bench

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "observe/trace.h"
#include "optcast/communicator.h"
#include "reduce/combine.h"
#include "server/server.h"

namespace optcast {
namespace {

using Clock = std::chrono::steady_clock;

double Ns(Clock::duration d) { return std::chrono::duration<double, std::nano>(d).count(); }

// Keeps the compiler from deleting a loop whose result is otherwise unused.
template <typename T>
void Keep(T&& v) {
  asm volatile("" : : "g"(v) : "memory");
}

// Flag checks a chunk passes on the server (receive start and end, each send) and on a client
// (send, result), counted generously for 4 ranks; plus one TraceSpan (the server's reduce).
constexpr int kChecksPerChunk = 16;

void HookCost() {
  constexpr long kIters = 200'000'000;
  auto t0 = Clock::now();
  for (long i = 0; i < kIters; ++i) Keep(i);
  const double empty_ns = Ns(Clock::now() - t0) / kIters;
  t0 = Clock::now();
  for (long i = 0; i < kIters; ++i) {
    observe::TraceSpan span("reduce", "server");
    if (span.on()) span.args().Add("i", static_cast<int64_t>(i));
    Keep(i);
  }
  const double span_ns = Ns(Clock::now() - t0) / kIters;
  t0 = Clock::now();
  for (long i = 0; i < kIters; ++i) {
    if (observe::TraceOn()) observe::TraceComplete("recv", "server", 0, 1);
    Keep(i);
  }
  const double check_ns = Ns(Clock::now() - t0) / kIters;

  constexpr size_t kCount = 16384;  // 64 KiB of float32
  std::vector<std::vector<float>> in(4, std::vector<float>(kCount, 1.0f));
  std::vector<float> out(kCount);
  const void* srcs[4] = {in[0].data(), in[1].data(), in[2].data(), in[3].data()};
  constexpr int kReps = 20000;
  t0 = Clock::now();
  for (int i = 0; i < kReps; ++i) {
    (void)reduce::Combine(DataType::kFloat32, RedOp::kSum, srcs, 4, out.data(), kCount);
    Keep(out[i % kCount]);
  }
  const double chunk_ns = Ns(Clock::now() - t0) / kReps;
  const double extra = std::max(0.0, span_ns - empty_ns) + kChecksPerChunk * std::max(0.0, check_ns - empty_ns);
  std::printf("# 1. trace hook with tracing off\n");
  std::printf("%-44s %10.2f ns\n", "empty loop iteration (baseline)", empty_ns);
  std::printf("%-44s %10.2f ns\n", "... with an if (TraceOn()) hook", check_ns);
  std::printf("%-44s %10.2f ns\n", "... with a TraceSpan hook", span_ns);
  std::printf("%-44s %10.2f ns\n", "reduce one 64 KiB float32 chunk, 4 ranks", chunk_ns);
  std::printf("%-44s %10.4f %%\n", "(1 span + 16 checks) per chunk / reduce time", 100.0 * extra / chunk_ns);
}

struct Cluster {
  std::unique_ptr<server::Server> server;
  std::thread thread;
  std::unique_ptr<Communicator> comm[2];
  ~Cluster() {
    comm[0].reset();
    comm[1].reset();
    if (server) server->Stop();
    if (thread.joinable()) thread.join();
  }
};

Status MakeCluster(Cluster* c) {
  server::ServerOptions o;
  o.listen = {"127.0.0.1", 0};
  c->server = std::make_unique<server::Server>(o);
  OPTCAST_RETURN_IF_ERROR(c->server->Start());
  c->thread = std::thread([c] { (void)c->server->Run(); });
  const JobId job = JobId::Random();
  for (int r = 0; r < 2; ++r) {
    CommunicatorOptions co;
    co.servers = {"127.0.0.1:" + std::to_string(c->server->port())};
    co.job_id = job;
    co.nranks = 2;
    co.rank = r;
    OPTCAST_RETURN_IF_ERROR(Communicator::Create(co, &c->comm[r]));
  }
  return Status::Ok();
}

// Mean time of one AllReduce of `count` float32 over `iters` iterations; both ranks are driven
// from this thread through the asynchronous API.
double AllReduceUs(Cluster& c, std::vector<float> (&buf)[4], size_t count, int iters) {
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    Request* req[2];
    for (int r = 0; r < 2; ++r) {
      (void)c.comm[r]->IAllReduce(buf[r].data(), buf[2 + r].data(), count, DataType::kFloat32, RedOp::kSum, &req[r]);
    }
    bool done[2] = {false, false};
    while (!done[0] || !done[1]) {
      for (int r = 0; r < 2; ++r) {
        if (!done[r] && !c.comm[r]->Test(req[r], &done[r]).ok()) return -1;
      }
    }
  }
  return Ns(Clock::now() - t0) / 1e3 / iters;
}

int EndToEnd() {
  Cluster c;
  if (Status st = MakeCluster(&c); !st.ok()) {
    std::fprintf(stderr, "cannot start the cluster: %s\n", st.message().c_str());
    return 1;
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / ("optcast-trace-bench-" + std::to_string(::getpid()) + ".json"))
          .string();
  std::printf("\n# 2. AllReduce, 2 ranks, 1 server, loopback; median of 7 interleaved rounds (us per op)\n");
  std::printf("%10s %12s %12s %12s %10s %10s\n", "bytes", "off", "on", "off again", "on/off", "off2/off");
  for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20}) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> buf[4];
    for (auto& b : buf) b.assign(count, 1.0f);
    const int iters = bytes >= (16u << 20) ? 5 : bytes >= (1u << 20) ? 40 : 400;
    (void)AllReduceUs(c, buf, count, iters);  // warm-up
    std::vector<double> off, on, off2;
    for (int round = 0; round < 7; ++round) {
      off.push_back(AllReduceUs(c, buf, count, iters));
      if (!observe::StartTrace(path, "trace bench").ok()) return 1;
      on.push_back(AllReduceUs(c, buf, count, iters));
      observe::StopTrace();
      off2.push_back(AllReduceUs(c, buf, count, iters));
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double a = median(off), b = median(on), d = median(off2);
    std::printf("%10zu %12.1f %12.1f %12.1f %10.3f %10.3f\n", bytes, a, b, d, b / a, d / a);
  }
  std::filesystem::remove(path);
  return 0;
}

}  // namespace
}  // namespace optcast

int main() {
  optcast::HookCost();
  return optcast::EndToEnd();
}
