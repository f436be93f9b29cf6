// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// One rank of an NCCL AllReduce, for tests/nccl/gpu_collnet_check.sh (which builds it with g++
// against CUDA and NCCL; CMake does not). Rank 0 writes the NCCL unique id to ID_FILE, the
// others wait for it. Every rank uses GPU 0. Exits 0 when every result is exact.
//
//   gpu_allreduce RANK NRANKS ID_FILE

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)
#define CHECK_NCCL(x)                                                                         \
  do {                                                                                        \
    ncclResult_t r_ = (x);                                                                    \
    if (r_ != ncclSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); \
      std::exit(3);                                                                           \
    }                                                                                         \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s RANK NRANKS ID_FILE\n", argv[0]);
    return 1;
  }
  const int rank = std::atoi(argv[1]);
  const int nranks = std::atoi(argv[2]);
  const std::string id_file = argv[3];

  ncclUniqueId id;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    const std::string tmp = id_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr || std::fwrite(&id, sizeof(id), 1, f) != 1 || std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), id_file.c_str()) != 0) {
      std::perror("writing the unique id");
      return 1;
    }
  } else {
    FILE* f = nullptr;
    for (int i = 0; i < 600 && f == nullptr; ++i) {
      f = std::fopen(id_file.c_str(), "rb");
      if (f == nullptr) usleep(100000);
    }
    if (f == nullptr || std::fread(&id, sizeof(id), 1, f) != 1) {
      std::fprintf(stderr, "rank %d: no unique id in %s after 60 s\n", rank, id_file.c_str());
      return 1;
    }
    std::fclose(f);
  }

  CHECK_CUDA(cudaSetDevice(0));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  // Small integers: sums are exact in float32, so every rank must get exactly the reference.
  const size_t count = (16u << 20) / sizeof(float) + 1;  // 16 MiB + 4 bytes: odd, many steps
  std::vector<float> host(count), result(count);
  float* buf = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, count * sizeof(float)));
  int bad = 0;
  for (int iter = 0; iter < 5 && bad == 0; ++iter) {
    for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>((i + iter) % 7 + rank);
    CHECK_CUDA(cudaMemcpy(buf, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream));  // in place
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(result.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) {
      const float want = static_cast<float>(nranks * ((i + iter) % 7) + nranks * (nranks - 1) / 2);
      if (result[i] != want && bad++ < 5) {
        std::fprintf(stderr, "rank %d iteration %d: element %zu is %g, expected %g\n", rank, iter, i, result[i], want);
      }
    }
  }
  CHECK_CUDA(cudaFree(buf));
  CHECK_NCCL(ncclCommDestroy(comm));
  if (bad != 0) {
    std::fprintf(stderr, "rank %d: AllReduce results WRONG (%d elements)\n", rank, bad);
    return 4;
  }
  std::printf("rank %d: AllReduce of %zu floats x 5 OK\n", rank, count);
  return 0;
}
