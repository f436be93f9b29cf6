// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// Throughput of the server's reduction kernels against memcpy, 8 MiB per buffer, one core, and of
// the client's float32 wire conversions (BM_Wire, below). Bytes
// are counted as memory traffic: nsrc reads + 1 write for Combine, 1 read + 1 write per copied
// buffer for memcpy, so the two bytes/s figures compare directly. Every Combine benchmark also
// copies each of its sources once between iterations (untimed) and reports, both timed in this
// thread's CPU time:
//   memcpy_GB/s  memcpy over the same buffers, same run
//   of_bound     Combine's traffic rate / memcpy's: the fraction of the memory-bandwidth bound

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <vector>

#include "optcast/types.h"
#include "reduce/combine.h"
#include "reduce/half.h"
#include "reduce/simd_kernels.h"
#include "reduce/wire_convert.h"

namespace optcast::reduce {
namespace {

constexpr size_t kBytesPerBuffer = 8 << 20;

// This thread's CPU time: a busy shared machine preempts the benchmark, which would stretch
// wall-clock figures of Combine and memcpy by different amounts.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

// Page-aligned and fully written, so page faults stay out of the timed loop.
Buffer MakeBuffer(DataType dtype, uint64_t seed) {
  Buffer buffer(static_cast<uint8_t*>(std::aligned_alloc(4096, kBytesPerBuffer)));
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);  // normal values: no slow paths
  const size_t count = kBytesPerBuffer / DataTypeSize(dtype);
  for (size_t i = 0; i < count; ++i) {
    const float v = dist(rng);
    switch (dtype) {
      case DataType::kFloat16: {
        const uint16_t h = FloatToHalf(v);
        std::memcpy(buffer.get() + 2 * i, &h, 2);
        break;
      }
      case DataType::kBFloat16: {
        const uint16_t b = FloatToBFloat16(v);
        std::memcpy(buffer.get() + 2 * i, &b, 2);
        break;
      }
      default: std::memcpy(buffer.get() + 4 * i, &v, 4); break;  // float32
    }
  }
  return buffer;
}

void BM_CombineSum(benchmark::State& state, DataType dtype) {
  const int nsrc = static_cast<int>(state.range(0));
  std::vector<Buffer> sources;
  std::vector<const void*> ptrs;
  for (int s = 0; s < nsrc; ++s) {
    sources.push_back(MakeBuffer(dtype, s));
    ptrs.push_back(sources.back().get());
  }
  Buffer dst = MakeBuffer(dtype, 1000);
  Buffer copy = MakeBuffer(dtype, 1001);
  const size_t count = kBytesPerBuffer / DataTypeSize(dtype);
  double copy_seconds = 0, combine_seconds = 0;
  for (auto _ : state) {
    const double combine_start = ThreadCpuSeconds();
    const Status status = Combine(dtype, RedOp::kSum, ptrs.data(), nsrc, dst.get(), count);
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
    combine_seconds += ThreadCpuSeconds() - combine_start;

    // The baseline: every source copied once, through the same caches and pages.
    state.PauseTiming();
    const double copy_start = ThreadCpuSeconds();
    for (int s = 0; s < nsrc; ++s) {
      std::memcpy(copy.get(), ptrs[s], kBytesPerBuffer);
      benchmark::DoNotOptimize(copy.get());
      benchmark::ClobberMemory();
    }
    copy_seconds += ThreadCpuSeconds() - copy_start;
    state.ResumeTiming();
  }
  const double combine_bytes = static_cast<double>(state.iterations()) * (nsrc + 1) * kBytesPerBuffer;
  const double copy_bytes = static_cast<double>(state.iterations()) * nsrc * 2.0 * kBytesPerBuffer;
  state.SetBytesProcessed(static_cast<int64_t>(combine_bytes));
  const double copy_rate = copy_bytes / copy_seconds;
  state.counters["memcpy_GB/s"] = copy_rate / 1e9;
  state.counters["of_bound"] = combine_bytes / combine_seconds / copy_rate;
  state.SetLabel(detail::SimdTargetName());
}

// memcpy over `pairs` pairs of 8 MiB buffers: 1 pair is the same buffer size as one Combine
// source; 4 pairs (64 MiB) overflow the last-level cache like Combine with 4+ sources does.
void BM_Memcpy(benchmark::State& state) {
  const int pairs = static_cast<int>(state.range(0));
  std::vector<Buffer> sources, destinations;
  for (int p = 0; p < pairs; ++p) {
    sources.push_back(MakeBuffer(DataType::kFloat32, 2 * p));
    destinations.push_back(MakeBuffer(DataType::kFloat32, 2 * p + 1));
  }
  for (auto _ : state) {
    for (int p = 0; p < pairs; ++p) {
      std::memcpy(destinations[p].get(), sources[p].get(), kBytesPerBuffer);
      benchmark::DoNotOptimize(destinations[p].get());
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * pairs * 2 * static_cast<int64_t>(kBytesPerBuffer));
}

// The float32 wire conversions (reduce/wire_convert.h) over `floats` float32 elements against
// memcpy of the same float32 data, both in this thread's CPU time:
//   of_memcpy  memcpy's time / the conversion's: 1 or more is at least as fast as copying the
//              float32 data once
// 16384 floats (64 KiB) is the client's narrowing block, in cache as it is sent; 2 Mi floats
// (8 MiB) is a buffer that is not.
void BM_Wire(benchmark::State& state, DataType wire, bool narrow) {
  const size_t floats = static_cast<size_t>(state.range(0));
  std::vector<float> wide(floats), copy(floats);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : wide) v = dist(rng);
  std::vector<uint16_t> narrowed(floats);
  (void)NarrowFloat32(wire, wide.data(), narrowed.data(), floats);
  double convert_seconds = 0, copy_seconds = 0;
  for (auto _ : state) {
    const double start = ThreadCpuSeconds();
    const Status st = narrow ? NarrowFloat32(wire, wide.data(), narrowed.data(), floats)
                             : WidenToFloat32(wire, narrowed.data(), wide.data(), floats);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(narrowed.data());
    benchmark::DoNotOptimize(wide.data());
    benchmark::ClobberMemory();
    convert_seconds += ThreadCpuSeconds() - start;
    state.PauseTiming();
    const double copy_start = ThreadCpuSeconds();
    std::memcpy(copy.data(), wide.data(), floats * sizeof(float));
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
    copy_seconds += ThreadCpuSeconds() - copy_start;
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * floats * sizeof(float)));
  state.counters["of_memcpy"] = copy_seconds / convert_seconds;
}

void WireSizes(benchmark::internal::Benchmark* b) { b->ArgName("floats")->Arg(16384)->Arg(2 << 20); }

BENCHMARK_CAPTURE(BM_Wire, narrow_bf16, DataType::kBFloat16, true)->Apply(WireSizes);
BENCHMARK_CAPTURE(BM_Wire, widen_bf16, DataType::kBFloat16, false)->Apply(WireSizes);
BENCHMARK_CAPTURE(BM_Wire, narrow_fp16, DataType::kFloat16, true)->Apply(WireSizes);
BENCHMARK_CAPTURE(BM_Wire, widen_fp16, DataType::kFloat16, false)->Apply(WireSizes);

void SourceCounts(benchmark::internal::Benchmark* b) { b->ArgName("nsrc")->Arg(2)->Arg(4)->Arg(8); }

BENCHMARK_CAPTURE(BM_CombineSum, float32, DataType::kFloat32)->Apply(SourceCounts);
BENCHMARK_CAPTURE(BM_CombineSum, float16, DataType::kFloat16)->Apply(SourceCounts);
BENCHMARK_CAPTURE(BM_CombineSum, bfloat16, DataType::kBFloat16)->Apply(SourceCounts);
BENCHMARK(BM_Memcpy)->ArgName("pairs")->Arg(1)->Arg(4);

}  // namespace
}  // namespace optcast::reduce
