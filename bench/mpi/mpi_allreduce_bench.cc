// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Times MPI_Allreduce (float32 sum) of a range of sizes, nccl-tests style. Run it under mpirun
// with and without liboptcast-mpi.so preloaded to compare the two in the same setting.
//
//   mpirun -np 4 optcast-mpi-allreduce-bench [-b 1M] [-e 64M] [-f 4] [-n 5] [-w 1]

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

size_t ParseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K':
    case 'k': v *= 1 << 10; break;
    case 'M':
    case 'm': v *= 1 << 20; break;
    case 'G':
    case 'g': v *= 1 << 30; break;
    default: break;
  }
  return size_t(v);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  size_t min_bytes = 1 << 20, max_bytes = 64 << 20;
  int factor = 4, iters = 5, warmup = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-b")
      min_bytes = ParseSize(argv[i + 1]);
    else if (flag == "-e")
      max_bytes = ParseSize(argv[i + 1]);
    else if (flag == "-f")
      factor = std::atoi(argv[i + 1]);
    else if (flag == "-n")
      iters = std::atoi(argv[i + 1]);
    else if (flag == "-w")
      warmup = std::atoi(argv[i + 1]);
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    std::printf("# MPI_Allreduce float32 sum, %d ranks, %d iterations after %d warm-up\n", size, iters, warmup);
    std::printf("# %12s %12s %10s %10s %10s %7s\n", "size", "count", "time(us)", "algbw", "busbw", "#wrong");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> buf(count);
    double total = 0;
    long wrong = 0;
    for (int it = 0; it < warmup + iters; ++it) {
      // Element i of rank r is (r+1)(i mod 7 + 1): the sum is exact in float32.
      for (size_t i = 0; i < count; ++i) buf[i] = float((rank + 1) * (i % 7 + 1));
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      const double elapsed = MPI_Wtime() - start;
      if (it >= warmup) total += elapsed;
      if (it == warmup + iters - 1) {
        const float ranks_sum = float(size * (size + 1) / 2);
        for (size_t i = 0; i < count; ++i) wrong += buf[i] != ranks_sum * float(i % 7 + 1);
      }
    }
    double mean = total / iters;
    MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the slowest rank
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      const double algbw = double(bytes) / mean / 1e9;
      std::printf("  %12zu %12zu %10.1f %10.3f %10.3f %7ld\n", bytes, count, mean * 1e6, algbw,
                  algbw * 2.0 * (size - 1) / size, wrong);
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
