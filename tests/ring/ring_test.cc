// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Ring AllReduce between real processes on loopback, checked against an exact reference.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "reduce/half.h"
#include "ring/ring_allreduce.h"
#include "transport/posix/socket.h"

namespace optcast {
namespace {

// Small integers, so every order of combination gives the same exact result in every type.
int64_t Input(int rank, size_t i, RedOp op) {
  const uint64_t h = (static_cast<uint64_t>(rank) * 2654435761u + i * 40503u) >> 3;
  if (op == RedOp::kProd) return (h % 3 == 0) ? 2 : 1;
  return static_cast<int64_t>(h % 9);
}

void Put(DataType dt, void* buf, size_t i, double v) {
  switch (dt) {
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = v; break;
    case DataType::kFloat16: static_cast<uint16_t*>(buf)[i] = reduce::FloatToHalf(static_cast<float>(v)); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(buf)[i] = reduce::FloatToBFloat16(static_cast<float>(v)); break;
    case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case DataType::kUInt8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case DataType::kUInt32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case DataType::kUInt64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
  }
}

double Get(DataType dt, const void* buf, size_t i) {
  switch (dt) {
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
    case DataType::kFloat16: return reduce::HalfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBFloat16: return reduce::BFloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kInt8: return static_cast<const int8_t*>(buf)[i];
    case DataType::kUInt8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kUInt32: return static_cast<const uint32_t*>(buf)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kUInt64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
  }
  return 0;
}

double Expected(int nranks, size_t i, DataType dt, RedOp op) {
  int64_t acc = Input(0, i, op);
  for (int r = 1; r < nranks; ++r) {
    const int64_t v = Input(r, i, op);
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg: acc += v; break;
      case RedOp::kProd: acc *= v; break;
      case RedOp::kMin: acc = std::min(acc, v); break;
      case RedOp::kMax: acc = std::max(acc, v); break;
      case RedOp::kBand: acc &= v; break;
      case RedOp::kBor: acc |= v; break;
      case RedOp::kBxor: acc ^= v; break;
    }
  }
  if (op != RedOp::kAvg) return static_cast<double>(acc);
  if (IsFloatingPoint(dt)) return static_cast<double>(acc) / nranks;
  return static_cast<double>(acc / nranks);  // integer avg truncates toward zero
}

// Runs body(rank, rendezvous) in nranks child processes; returns how many failed.
int RunRanks(int nranks, const std::function<int(int, bootstrap::Rendezvous&)>& body) {
  transport::posix::Socket listener;
  uint16_t port = 0;
  if (!transport::posix::Listen({"127.0.0.1", 0}, &listener).ok() ||
      !transport::posix::LocalPort(listener, &port).ok()) {
    return nranks;
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(60);  // a hang is a failure, never a stuck test
      std::unique_ptr<bootstrap::Rendezvous> rv;
      Status st = r == 0 ? bootstrap::Rendezvous::CreateRoot(std::move(listener), nranks, std::chrono::seconds(20), &rv)
                         : bootstrap::Rendezvous::Create({"127.0.0.1", port}, r, nranks, std::chrono::seconds(20), &rv);
      if (!st.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, st.ToString().c_str());
        _exit(3);
      }
      _exit(body(r, *rv));
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed;
}

struct Case {
  int nranks;
  std::vector<size_t> counts;
};

class RingTest : public ::testing::TestWithParam<int> {};

TEST_P(RingTest, EveryTypeAndOpMatchesTheReference) {
  const int nranks = GetParam();
  const std::vector<size_t> counts = {1, 3, 17, 1000, 65537};
  int failed = RunRanks(nranks, [&](int rank, bootstrap::Rendezvous& rv) {
    std::unique_ptr<ring::RingAllReduce> ring;
    Status st = ring::RingAllReduce::Create(rv, "127.0.0.1", std::chrono::seconds(20), &ring);
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
      return 4;
    }
    for (int d = 0; d < kNumDataTypes; ++d) {
      for (int o = 0; o < kNumRedOps; ++o) {
        const auto dt = static_cast<DataType>(d);
        const auto op = static_cast<RedOp>(o);
        if (!IsRedOpDefinedFor(op, dt)) continue;  // bitwise ops take integer types only
        for (size_t count : counts) {
          std::vector<uint8_t> send(count * DataTypeSize(dt)), recv(send.size());
          for (size_t i = 0; i < count; ++i) Put(dt, send.data(), i, static_cast<double>(Input(rank, i, op)));
          // Odd cases in place, even ones out of place.
          const bool in_place = count % 2 == 1;
          if (in_place) recv = send;
          st = ring->AllReduce(in_place ? recv.data() : send.data(), recv.data(), count, dt, op);
          if (!st.ok()) {
            std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
            return 5;
          }
          for (size_t i = 0; i < count; ++i) {
            const double want = Expected(nranks, i, dt, op);
            const double got = Get(dt, recv.data(), i);
            const double tol = (op == RedOp::kAvg && IsFloatingPoint(dt)) ? std::fabs(want) * 1e-2 : 0.0;
            if (std::fabs(got - want) > tol) {
              std::fprintf(stderr, "rank %d %s %s count %zu element %zu: got %g want %g\n", rank, DataTypeName(dt),
                           RedOpName(op), count, i, got, want);
              return 6;
            }
          }
        }
      }
    }
    return 0;
  });
  EXPECT_EQ(failed, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingTest, ::testing::Values(1, 2, 3, 4));

TEST(Ring, DeadNeighbourIsAnErrorNotAHang) {
  int failed = RunRanks(3, [](int rank, bootstrap::Rendezvous& rv) {
    std::unique_ptr<ring::RingAllReduce> ring;
    if (!ring::RingAllReduce::Create(rv, "127.0.0.1", std::chrono::seconds(2), &ring).ok()) return 4;
    if (rank == 2) _exit(0);  // leaves without taking part
    std::vector<float> buf(1 << 20, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    Status st = ring->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (st.ok()) return 7;
    return secs < 10 ? 0 : 8;
  });
  EXPECT_EQ(failed, 0);
}

}  // namespace
}  // namespace optcast
