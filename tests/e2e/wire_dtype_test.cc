// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// float32 collectives on a 16-bit wire (CommunicatorOptions::wire_dtype) through real servers on
// loopback: the contract's exact bits (wire_model.h), the accuracy bound against a float64
// reference, the comparison with a bfloat16 ring, half the bytes, and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "observe/metrics.h"
#include "optcast/communicator.h"
#include "wire_model.h"

namespace optcast::e2e {
namespace {

constexpr int kRanks = 4;

// Values of both signs over 24 binades (2^-12 to 2^12), so that the sum of the ranks' values
// cancels in places and rounding errors of every size show.
std::vector<std::vector<float>> SpreadInputs(size_t count, uint64_t seed, int exponent_span = 12) {
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(count));
  for (int r = 0; r < kRanks; ++r) {
    std::mt19937_64 rng(seed * 1000 + static_cast<uint64_t>(r));
    std::uniform_int_distribution<int> exponent(-exponent_span, exponent_span);
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    for (float& v : in[r]) v = std::ldexp(mantissa(rng), exponent(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
  }
  return in;
}

// How many elements of `got` differ in their bits from `want`, and the first of them.
std::string CompareBits(const std::vector<float>& got, const std::vector<float>& want) {
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && wrong++ == 0) first = i;
  }
  if (wrong == 0) return "";
  return std::to_string(wrong) + " of " + std::to_string(want.size()) + " elements differ from the contract, first [" +
         std::to_string(first) + "]: " + std::to_string(got[first]) + " against " + std::to_string(want[first]);
}

// A bfloat16 ring as DDP's bf16_compress_hook runs it: inputs rounded to bfloat16, and every
// partial sum rounded to bfloat16 again.
float Bf16RingSum(const std::vector<std::vector<float>>& in, size_t i) {
  float acc = RoundToWire(DataType::kBFloat16, in[0][i]);
  for (size_t r = 1; r < in.size(); ++r)
    acc = RoundToWire(DataType::kBFloat16, acc + RoundToWire(DataType::kBFloat16, in[r][i]));
  return acc;
}

TEST(E2eWireDtype, Bf16AllReduceGivesTheContractsBitsWithinTheBoundAndBeatsABf16Ring) {
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(2).ok());
  constexpr size_t kCount = 150001;  // many chunks on both servers, an odd tail
  const auto in = SpreadInputs(kCount, 1);
  const auto want = ExpectedOnWire(DataType::kBFloat16, RedOp::kSum, in);
  std::vector<std::vector<float>> out(kRanks, std::vector<float>(kCount)), again = out;
  CommConfig c;
  c.wire_dtype = DataType::kBFloat16;
  ExpectAllOk(RunRanksOnThreads(farm.addresses(), kRanks, c, [&](int r, Communicator& comm) {
    std::vector<float> send = in[r];
    OPTCAST_RETURN_IF_ERROR(comm.AllReduce(send.data(), out[r].data(), kCount, DataType::kFloat32, RedOp::kSum));
    if (send != in[r]) return InternalError("the send buffer changed");
    return comm.AllReduce(send.data(), again[r].data(), kCount, DataType::kFloat32, RedOp::kSum);
  }));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(CompareBits(out[r], want), "") << "rank " << r;
    EXPECT_EQ(std::memcmp(out[r].data(), again[r].data(), kCount * sizeof(float)), 0)
        << "rank " << r << ": runs differ";
  }
  // Against the exact sum, as a fraction of the sum of the inputs' magnitudes M. With u = 2^-8
  // (bfloat16's unit roundoff, round to nearest even): rounding the inputs moves the sum by at
  // most u*M, the float32 fold by (n-1)*2^-24 of what it adds, and rounding the result by u of
  // the result, so every element is within (2u + 4u^2 + n*2^-23)*M, about 2^-7*M; the mean is
  // also below the bfloat16 ring's on the same data. (u*M alone is what the inputs' rounding
  // allows: most elements are within it, not all.)
  const double u = std::ldexp(1.0, -8);
  const double bound = 2 * u + 4 * u * u + kRanks * std::ldexp(1.0, -23);
  double ours = 0, ring = 0, worst = 0;
  size_t outside = 0, beyond_u = 0;
  for (size_t i = 0; i < kCount; ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < kRanks; ++r) exact += in[r][i], magnitude += std::fabs(in[r][i]);
    const double err = std::fabs(out[0][i] - exact) / magnitude;
    worst = std::max(worst, err);
    outside += err > bound;
    beyond_u += err > u;
    ours += err;
    ring += std::fabs(Bf16RingSum(in, i) - exact) / magnitude;
  }
  EXPECT_EQ(outside, 0u) << "worst relative error " << worst << ", bound " << bound;
  std::printf("bf16 wire: %zu of %zu elements beyond u*M, none beyond the bound\n", beyond_u, kCount);
  EXPECT_LT(ours, ring) << "mean relative error " << ours / kCount << " against the bfloat16 ring's " << ring / kCount;
  std::printf("bf16 wire, %d ranks: mean error %.3g of the inputs' magnitude (bfloat16 ring: %.3g), worst %.3g\n",
              kRanks, ours / kCount, ring / kCount, worst);
}

TEST(E2eWireDtype, InPlaceAvgMinMaxAndReduceScatterGiveTheContractsBits) {
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(3).ok());
  constexpr size_t kCount = 40003;
  CommConfig c;
  c.wire_dtype = DataType::kBFloat16;
  c.chunk_bytes = 4096;  // chunks smaller than a narrowing block, and not aligned to it
  struct Case {
    RedOp op;
    bool in_place;
  };
  const Case cases[] = {{RedOp::kAvg, true}, {RedOp::kMin, true}, {RedOp::kMax, false}, {RedOp::kSum, true}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string("allreduce ") + RedOpName(k.op) + (k.in_place ? " in place" : ""));
    const auto in = SpreadInputs(kCount, 10 + static_cast<uint64_t>(k.op));
    const auto want = ExpectedOnWire(DataType::kBFloat16, k.op, in);
    std::vector<std::vector<float>> out(kRanks, std::vector<float>(kCount));
    ExpectAllOk(RunRanksOnThreads(farm.addresses(), kRanks, c, [&](int r, Communicator& comm) {
      std::vector<float> send = in[r];
      float* dst = k.in_place ? send.data() : out[r].data();
      OPTCAST_RETURN_IF_ERROR(comm.AllReduce(send.data(), dst, kCount, DataType::kFloat32, k.op));
      if (k.in_place) out[r] = send;
      return Status::Ok();
    }));
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(CompareBits(out[r], want), "") << "rank " << r;
  }
  constexpr size_t kSegment = 10007;
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(std::string("reduce-scatter avg") + (in_place ? " in place" : ""));
    const auto in = SpreadInputs(kSegment * kRanks, 20 + in_place);
    const auto want = ExpectedOnWire(DataType::kBFloat16, RedOp::kAvg, in);
    std::vector<std::vector<float>> out(kRanks, std::vector<float>(kSegment));
    ExpectAllOk(RunRanksOnThreads(farm.addresses(), kRanks, c, [&](int r, Communicator& comm) {
      std::vector<float> send = in[r];
      float* dst = in_place ? send.data() + static_cast<size_t>(r) * kSegment : out[r].data();
      OPTCAST_RETURN_IF_ERROR(comm.ReduceScatter(send.data(), dst, kSegment, DataType::kFloat32, RedOp::kAvg));
      if (in_place) std::memcpy(out[r].data(), dst, kSegment * sizeof(float));
      return Status::Ok();
    }));
    for (int r = 0; r < kRanks; ++r) {
      const std::vector<float> mine(want.begin() + static_cast<long>(r * kSegment),
                                    want.begin() + static_cast<long>((r + 1) * kSegment));
      EXPECT_EQ(CompareBits(out[r], mine), "") << "rank " << r;
    }
  }
}

TEST(E2eWireDtype, Fp16WireGivesTheContractsBits) {
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(2).ok());
  constexpr size_t kCount = 70001;
  const auto in = SpreadInputs(kCount, 30, 6);  // float16's range: 2^-6 to 2^6, sums well below 65504
  const auto want = ExpectedOnWire(DataType::kFloat16, RedOp::kSum, in);
  std::vector<std::vector<float>> out(kRanks, std::vector<float>(kCount));
  CommConfig c;
  c.wire_dtype = DataType::kFloat16;
  ExpectAllOk(RunRanksOnThreads(farm.addresses(), kRanks, c, [&](int r, Communicator& comm) {
    return comm.AllReduce(in[r].data(), out[r].data(), kCount, DataType::kFloat32, RedOp::kSum);
  }));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(CompareBits(out[r], want), "") << "rank " << r;
}

uint64_t ReceivedBytes(ServerFarm& farm) {
  uint64_t total = 0;
  for (int i = 0; i < farm.size(); ++i) {
    const std::string text = farm.server(i).metrics().Render();
    const std::string series = "optcast_server_lane_received_bytes_total{lane=\"0\"} ";
    const size_t at = text.find(series);
    if (at != std::string::npos) total += std::strtoull(text.c_str() + at + series.size(), nullptr, 10);
  }
  return total;
}

// Half the bytes reach the servers; what the wire type does not apply to travels as it is, exact.
TEST(E2eWireDtype, HalfTheBytesAndOtherCollectivesTravelAsTheyAre) {
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(2).ok());
  constexpr size_t kCount = 1 << 18;
  std::vector<float> ones(kCount, 1.0f);
  auto sum_once = [&](DataType wire) {
    CommConfig c;
    c.wire_dtype = wire;
    const uint64_t before = ReceivedBytes(farm);
    ExpectAllOk(RunRanksOnThreads(farm.addresses(), kRanks, c, [&](int, Communicator& comm) {
      std::vector<float> out(kCount);
      OPTCAST_RETURN_IF_ERROR(comm.AllReduce(ones.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum));
      return out[0] == kRanks && out[kCount - 1] == kRanks ? Status::Ok() : InternalError("wrong sum");
    }));
    return ReceivedBytes(farm) - before;
  };
  const uint64_t full = sum_once(DataType::kFloat32), narrow = sum_once(DataType::kBFloat16);
  EXPECT_GE(full, kRanks * kCount * sizeof(float));
  EXPECT_NEAR(static_cast<double>(narrow) / static_cast<double>(full), 0.5, 0.01) << narrow << " of " << full;

  CommConfig c;
  c.wire_dtype = DataType::kBFloat16;
  ExpectAllOk(RunRanksOnThreads(farm.addresses(), kRanks, c, [&](int r, Communicator& comm) {
    constexpr size_t kSmall = 5003;
    for (auto [dt, op] : {std::pair{DataType::kFloat32, RedOp::kProd}, std::pair{DataType::kInt32, RedOp::kSum},
                          std::pair{DataType::kFloat64, RedOp::kSum}}) {
      GuardedBuffer send(kSmall * DataTypeSize(dt)), recv(kSmall * DataTypeSize(dt));
      FillInput(dt, op, 40, r, 0, kSmall, send.data());
      OPTCAST_RETURN_IF_ERROR(comm.AllReduce(send.data(), recv.data(), kSmall, dt, op));
      const std::string err = VerifyReduction(recv.data(), dt, op, 40, kRanks, 0, kSmall);
      if (!err.empty()) return InternalError(std::string(DataTypeName(dt)) + ": " + err);
    }
    GuardedBuffer send(kSmall * sizeof(float)), recv(kSmall * kRanks * sizeof(float));
    FillInput(DataType::kFloat32, RedOp::kSum, 41, r, 0, kSmall, send.data());
    OPTCAST_RETURN_IF_ERROR(comm.AllGather(send.data(), recv.data(), kSmall, DataType::kFloat32));
    const std::string err = VerifyAllGather(recv.data(), DataType::kFloat32, 41, kRanks, kSmall);
    return err.empty() ? Status::Ok() : InternalError("allgather: " + err);
  }));
}

TEST(E2eWireDtype, RanksThatDisagreeOnTheWireTypeGetAnErrorNamingBothRanksAndTypes) {
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(1).ok());
  const JobId job = JobId::Random();
  std::vector<Status> st(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommConfig c;
      c.timeout = milliseconds(10000);
      c.wire_dtype = r == 0 ? DataType::kBFloat16 : DataType::kFloat32;
      std::unique_ptr<Communicator> comm;
      st[r] = MakeComm(farm.addresses(), job, 2, r, c, &comm);
      std::vector<float> buf(1000, 1.0f);
      if (st[r].ok()) st[r] = comm->AllReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(st[r].ok()) << "rank " << r;
    const std::string& m = st[r].message();
    EXPECT_NE(m.find("data type: rank "), std::string::npos) << m;
    EXPECT_NE(m.find("bfloat16"), std::string::npos) << m;
    EXPECT_NE(m.find("float32"), std::string::npos) << m;
    EXPECT_NE(m.find("OPTCAST_WIRE_DTYPE"), std::string::npos) << m;
  }
}

// SetWireDtype between collectives: the ranks switch together, and each collective travels as
// its wire type was when it was issued.
TEST(E2eWireDtype, SetWireDtypeSwitchesTheCollectivesIssuedAfterIt) {
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(2).ok());
  constexpr size_t kCount = 20011;
  const auto in = SpreadInputs(kCount, 50);
  const auto exact = ExpectedOnWire(DataType::kFloat32, RedOp::kSum, in);
  const auto narrow = ExpectedOnWire(DataType::kBFloat16, RedOp::kSum, in);
  std::vector<std::vector<std::vector<float>>> out(3, std::vector<std::vector<float>>(kRanks));
  ExpectAllOk(RunRanksOnThreads(farm.addresses(), kRanks, CommConfig{}, [&](int r, Communicator& comm) {
    if (comm.SetWireDtype(DataType::kInt32).code() != Code::kInvalidArgument) return InternalError("int32 accepted");
    const DataType order[3] = {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat32};
    for (int k = 0; k < 3; ++k) {
      OPTCAST_RETURN_IF_ERROR(comm.SetWireDtype(order[k]));
      out[k][r].resize(kCount);
      OPTCAST_RETURN_IF_ERROR(comm.AllReduce(in[r].data(), out[k][r].data(), kCount, DataType::kFloat32, RedOp::kSum));
    }
    return Status::Ok();
  }));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(CompareBits(out[0][r], exact), "") << "rank " << r << ", before";
    EXPECT_EQ(CompareBits(out[1][r], narrow), "") << "rank " << r << ", on the bfloat16 wire";
    EXPECT_EQ(CompareBits(out[2][r], exact), "") << "rank " << r << ", after";
  }
}

TEST(E2eWireDtype, AWireTypeThatIsNotOneIsAClearError) {
  CommunicatorOptions o;
  o.servers = {"127.0.0.1:1"};
  o.nranks = 1;
  o.rank = 0;
  o.wire_dtype = DataType::kInt8;
  std::unique_ptr<Communicator> comm;
  const Status st = Communicator::Create(o, &comm);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("int8 is not a wire type"), std::string::npos) << st.message();

  DataType wire = DataType::kFloat32;
  EXPECT_TRUE(ParseWireDtype("bf16", "X", &wire).ok());
  EXPECT_EQ(wire, DataType::kBFloat16);
  EXPECT_TRUE(ParseWireDtype("fp16", "X", &wire).ok());
  EXPECT_EQ(wire, DataType::kFloat16);
  EXPECT_TRUE(ParseWireDtype("off", "X", &wire).ok());
  EXPECT_EQ(wire, DataType::kFloat32);
  const Status bad = ParseWireDtype("fp8", "OPTCAST_WIRE_DTYPE", &wire);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("OPTCAST_WIRE_DTYPE='fp8'"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("bf16, fp16 or off"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace optcast::e2e
