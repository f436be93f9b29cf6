// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// optcast-gloo-bench: Gloo's ring AllReduce (float32 sum, TCP transport) as one rank of a
// multi-host run, with the same sizes, iterations, table and JSON rows as `optcast bench`, so the
// emulated cluster can put a widely used peer-to-peer baseline next to the reduction servers.
//
// Ranks meet through a Gloo FileStore: a directory that every rank can see (network namespaces
// share the file system), which must be empty at the start of a run.

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/env.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int rank = -1;
  int nranks = 0;
  std::string store;
  std::string host;
  std::string min_bytes = "8";
  std::string max_bytes = "64M";
  uint64_t factor = 2;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  int timeout_ms = 60000;
  std::string json_path;
};

// Rank r contributes (r + 1) * (i % 7 + 1) at element i, so the sum is n(n+1)/2 * (i % 7 + 1):
// small integers, exact in float32 whatever order the ring adds them in.
void Fill(std::vector<float>& v, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1));
}

uint64_t CountWrong(const std::vector<float>& v, size_t count, int nranks) {
  const int tri = nranks * (nranks + 1) / 2;
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += v[i] != static_cast<float>(tri * static_cast<int>(i % 7 + 1));
  return wrong;
}

void AllreduceRing(const std::shared_ptr<gloo::Context>& ctx, const float* send, float* recv, size_t count,
                   uint32_t tag) {
  gloo::AllreduceOptions opts(ctx);
  opts.setInput(const_cast<float*>(send), count);
  opts.setOutput(recv, count);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  opts.setTag(tag);
  gloo::allreduce(opts);
}

// Gathers the slowest rank's time and the total of wrong values (setup-time traffic; untimed).
void Summarize(const std::shared_ptr<gloo::Context>& ctx, double* time_us, double* wrong) {
  double t[1] = {*time_us};
  gloo::AllreduceOptions tmax(ctx);
  tmax.setOutput(t, 1);
  tmax.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
  tmax.setTag(1);
  gloo::allreduce(tmax);
  double w[1] = {*wrong};
  gloo::AllreduceOptions wsum(ctx);
  wsum.setOutput(w, 1);
  wsum.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
  wsum.setTag(2);
  gloo::allreduce(wsum);
  *time_us = t[0];
  *wrong = w[0];
}

int Run(const Options& o) {
  auto lo = optcast::ParseByteSize(o.min_bytes);
  auto hi = optcast::ParseByteSize(o.max_bytes);
  if (!lo || !hi || *lo < 4 || *hi < *lo || o.factor < 1 || o.iters < 1 || o.warmup < 0) {
    std::fprintf(stderr, "optcast-gloo-bench: need 4 <= -b <= -e (sizes like 8, 1M), -f >= 1, -n >= 1, -w >= 0\n");
    return 2;
  }
  if (o.rank < 0 || o.rank >= o.nranks) {
    std::fprintf(stderr, "optcast-gloo-bench: need 0 <= --rank < --nranks\n");
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(o.store, ec);

  gloo::transport::tcp::attr attr;
  attr.hostname = o.host;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.nranks);
  ctx->setTimeout(std::chrono::milliseconds(o.timeout_ms));
  gloo::rendezvous::FileStore file_store(o.store);
  gloo::rendezvous::PrefixStore store("optcast-gloo-bench", file_store);
  ctx->connectFullMesh(store, dev);

  const size_t max_count = std::max<uint64_t>(1, *hi / sizeof(float));
  std::vector<float> send(max_count), recv(max_count);
  Fill(send, max_count, o.rank);
  const double bus_factor = o.nranks > 1 ? 2.0 * (o.nranks - 1) / o.nranks : 0.0;
  nlohmann::json rows = nlohmann::json::array();
  uint64_t total_wrong = 0;
  uint32_t tag = 100;

  if (o.rank == 0) {
    std::printf("# algo: gloo (gloo::allreduce, ring, TCP)   ranks: %d\n", o.nranks);
    std::printf("#%11s %12s %8s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time", "algbw", "busbw",
                "#wrong");
    std::printf("#%11s %12s %8s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  for (uint64_t bytes = *lo; bytes <= *hi; bytes *= o.factor) {
    const size_t count = std::max<uint64_t>(1, bytes / sizeof(float));
    for (int i = 0; i < o.warmup; ++i) AllreduceRing(ctx, send.data(), recv.data(), count, tag++);
    gloo::BarrierOptions barrier(ctx);
    barrier.setTag(tag++);
    gloo::barrier(barrier);
    const auto t0 = Clock::now();
    for (int i = 0; i < o.iters; ++i) AllreduceRing(ctx, send.data(), recv.data(), count, tag++);
    double time_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o.iters;
    double wrong = 0;
    if (o.check) {
      std::memset(recv.data(), 0xa5, count * sizeof(float));
      AllreduceRing(ctx, send.data(), recv.data(), count, tag++);
      wrong = static_cast<double>(CountWrong(recv, count, o.nranks));
    }
    Summarize(ctx, &time_us, &wrong);
    const uint64_t row_bytes = count * sizeof(float);
    const double algbw = row_bytes / time_us / 1e3;
    total_wrong += static_cast<uint64_t>(wrong);
    if (o.rank == 0) {
      std::printf("%12llu %12llu %8s %6s %10.2f %8.3f %8.3f %7llu\n", static_cast<unsigned long long>(row_bytes),
                  static_cast<unsigned long long>(count), "float32", "sum", time_us, algbw, algbw * bus_factor,
                  static_cast<unsigned long long>(wrong));
      std::fflush(stdout);
    }
    rows.push_back({{"algo", "gloo"},
                    {"bytes", row_bytes},
                    {"count", count},
                    {"time_us", time_us},
                    {"algbw_gbps", algbw},
                    {"busbw_gbps", algbw * bus_factor},
                    {"wrong", static_cast<uint64_t>(wrong)}});
    if (o.factor < 2) break;
  }
  if (o.rank == 0) {
    std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(total_wrong),
                total_wrong ? "FAILED" : "OK");
    if (!o.json_path.empty()) {
      nlohmann::json j = {
          {"nranks", o.nranks}, {"dtype", "float32"}, {"op", "sum"}, {"iters", o.iters}, {"results", rows}};
      std::ofstream(o.json_path) << j.dump(2) << "\n";
    }
  }
  return total_wrong ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Gloo ring AllReduce benchmark (float32 sum over TCP), one rank of a multi-host run"};
  app.add_option("--rank", o.rank, "This process's rank")->required();
  app.add_option("--nranks", o.nranks, "Number of ranks")->required();
  app.add_option("--store", o.store, "Rendezvous directory shared by all ranks (empty at start)")->required();
  app.add_option("--host", o.host, "Address to listen on, as the other ranks reach it")->required();
  app.add_option("-b,--minbytes", o.min_bytes, "Smallest size (e.g. 8, 1K, 1M)")->capture_default_str();
  app.add_option("-e,--maxbytes", o.max_bytes, "Largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "Multiply the size by this each step")->capture_default_str();
  app.add_option("-n,--iters", o.iters, "Timed iterations per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", o.warmup, "Untimed iterations per size")->capture_default_str();
  app.add_option("-c,--check", o.check, "Check results (1) or not (0)")->capture_default_str();
  app.add_option("--timeout-ms", o.timeout_ms, "Gloo's timeout for rendezvous and each collective")
      ->capture_default_str();
  app.add_option("--json", o.json_path, "Write the results as JSON to this file (rank 0)");
  CLI11_PARSE(app, argc, argv);
  try {
    return Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optcast-gloo-bench: rank %d: %s\n", o.rank, e.what());
    return 1;
  }
}
