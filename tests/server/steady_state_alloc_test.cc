// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// The server's event loop allocates per collective (its bookkeeping), never per chunk: a real
// server on loopback, two ranks on threads of this process, and a count of the heap
// allocations made on the server's thread while collectives of 16x more chunks run.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "optcast/communicator.h"
#include "server/server.h"

namespace {

std::atomic<uint64_t> g_server_thread_allocations{0};
thread_local bool t_count_allocations = false;

}  // namespace

// Counts allocations made by threads that opted in (the server's event loop below). The pair
// replaces the global operator new/delete, so malloc/free match inside it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (t_count_allocations) g_server_thread_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace optcast::server {
namespace {

// Runs `iters` float32 sum AllReduces of `count` elements on both ranks; returns the server
// thread's allocations meanwhile, or -1 on failure (reported through gtest).
int64_t AllocationsDuring(Communicator& a, Communicator& b, size_t count, int iters) {
  std::vector<float> send_a(count, 1.0f), send_b(count, 2.0f), recv_a(count), recv_b(count);
  const uint64_t before = g_server_thread_allocations.load();
  Status status_b;
  std::thread other([&] {
    for (int i = 0; i < iters && status_b.ok(); ++i) {
      status_b = b.AllReduce(send_b.data(), recv_b.data(), count, DataType::kFloat32, RedOp::kSum);
    }
  });
  Status status_a;
  for (int i = 0; i < iters && status_a.ok(); ++i) {
    status_a = a.AllReduce(send_a.data(), recv_a.data(), count, DataType::kFloat32, RedOp::kSum);
  }
  other.join();
  const uint64_t after = g_server_thread_allocations.load();
  EXPECT_TRUE(status_a.ok()) << status_a.ToString();
  EXPECT_TRUE(status_b.ok()) << status_b.ToString();
  for (size_t i = 0; i < count; ++i) {
    if (recv_a[i] != 3.0f || recv_b[i] != 3.0f) {
      ADD_FAILURE() << "element " << i << ": " << recv_a[i] << " / " << recv_b[i] << ", want 3";
      return -1;
    }
  }
  return static_cast<int64_t>(after - before);
}

TEST(ServerSteadyState, AllocationsDoNotGrowWithTheChunkCount) {
  ServerOptions opts;
  opts.listen = {"127.0.0.1", 0};
  opts.reduce_threads = 1;
  opts.reduce_offload_share = 0;  // the hand-off to the worker is part of the path under test
  Server server(opts);
  ASSERT_TRUE(server.Start().ok());
  std::thread loop([&] {
    t_count_allocations = true;
    (void)server.Run();
  });
  std::unique_ptr<Communicator> ranks[2];
  const JobId job = JobId::Random();
  for (int r = 0; r < 2; ++r) {
    CommunicatorOptions co;
    co.servers = {"127.0.0.1:" + std::to_string(server.port())};
    co.job_id = job;
    co.nranks = 2;
    co.rank = r;
    co.timeout = std::chrono::milliseconds(20000);
    co.chunk_bytes = 16384;  // 16 KiB chunks: 64 KiB is 4 chunks, 1 MiB is 64
    ASSERT_TRUE(Communicator::Create(co, &ranks[r]).ok());
  }
  // Warm-up: pools, free lists and queues grow to their working size.
  ASSERT_GE(AllocationsDuring(*ranks[0], *ranks[1], 1 << 18, 5), 0);
  ASSERT_GE(AllocationsDuring(*ranks[0], *ranks[1], 1 << 14, 5), 0);
  const int64_t small = AllocationsDuring(*ranks[0], *ranks[1], 1 << 14, 20);  // 4 chunks each
  const int64_t large = AllocationsDuring(*ranks[0], *ranks[1], 1 << 18, 20);  // 64 chunks each
  server.Stop();
  loop.join();
  ASSERT_GE(small, 0);
  ASSERT_GE(large, 0);
  // 20 collectives of 64 chunks from 2 ranks are 2560 chunk messages in and out; a per-chunk
  // allocation would show up as thousands.
  EXPECT_LE(large, small + 40) << "the server allocated " << large << " times for 20 collectives of 64 chunks, "
                               << small << " times for 20 of 4 chunks";
  RecordProperty("allocations_4_chunks", std::to_string(small));
  RecordProperty("allocations_64_chunks", std::to_string(large));
}

}  // namespace
}  // namespace optcast::server
