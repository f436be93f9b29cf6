// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A server that dies halfway through sending an in-place allreduce's result: each rank has half
// of that chunk's result and none has it whole. The rank keeps its input intact until a result is
// complete, so the survivors re-run the chunk from the ranks' inputs and every rank gets the
// exact sum. The dying server is scripted on a raw socket, so that it always dies mid-result.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>
#include <vector>

#include "harness.h"
#include "optcast/communicator.h"
#include "raw_client.h"
#include "scripted_server.h"
#include "wire_model.h"

namespace optcast::e2e {
namespace {

// Welcomes every rank, takes each rank's first chunk, sends each the result's header and half of
// its payload, then closes its side (FIN) and answers nothing more. `cut_elems`: how much of the
// result it sent.
ScriptedServer::Script HalfResult(int nranks, std::atomic<uint32_t>* cut_elems) {
  return [nranks, cut_elems](ScriptedServer& server, std::string* why) {
    if (!server.AcceptAndWelcome(nranks, why)) return false;
    const std::vector<int>& conns = server.conns();
    std::vector<ScriptedChunk> first(conns.size());
    for (size_t i = 0; i < conns.size(); ++i) {
      if (!server.ReadChunk(conns[i], &first[i], why)) return false;
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      const size_t esize = DataTypeSize(first[i].desc.dtype);
      const uint64_t bytes = uint64_t{first[i].ref.count} * esize;
      *cut_elems = first[i].ref.count / 2;
      // Half of a result whose every element is wrong: whatever lands of it must not count.
      std::vector<uint8_t> half(*cut_elems * esize, 0xff);
      const wire::ChunkDone done{first[i].desc.coll_seq, first[i].ref};
      if (!SendRaw(conns[i], Concat(Frame(wire::EncodeResult(done), bytes), half))) {
        *why = "half a result not sent";
        return false;
      }
    }
    for (int fd : conns) ::shutdown(fd, SHUT_WR);
    return true;
  };
}

// Rank r's input at element i: multiples of 3/8 below 750, exact in float32 (and their sums), most
// of them rounded by bfloat16.
float Input(int r, size_t i) { return static_cast<float>((r + 1) * static_cast<int>(i % 1000)) * 0.375f; }

// `wire`: float32 travels as it is, or as a 16-bit type (CommunicatorOptions::wire_dtype), where
// the staging buffer is what the in-place machinery keeps intact.
void ExpectExactSumAfterADeathMidResult(DataType wire) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  constexpr int kRanks = 2;
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(2).ok());
  ScriptedServer dying;
  ASSERT_TRUE(dying.Listen());
  std::atomic<uint32_t> cut_elems{0};
  dying.Start(HalfResult(kRanks, &cut_elems));
  // The scripted server first: it takes a share of every collective.
  std::vector<std::string> servers = {dying.address()};
  for (const std::string& a : farm.addresses()) servers.push_back(a);
  // 3 shards of 64 KiB, two chunks each: within what a rank keeps a copy of for failover.
  constexpr size_t kCount = 3 * 16384;
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(kCount));
  std::vector<uint32_t> servers_left(kRanks, 0);
  CommConfig c;
  c.timeout = milliseconds(20000);
  c.wire_dtype = wire;
  std::vector<std::vector<float>> inputs(kRanks, std::vector<float>(kCount));
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < kCount; ++i) inputs[r][i] = Input(r, i);
  }
  // The exact float32 sum, or the wire's contract (wire_model.h).
  const std::vector<float> want = ExpectedOnWire(wire, RedOp::kSum, inputs);
  const std::vector<Status> st = RunRanksOnThreads(servers, kRanks, c, [&](int r, Communicator& comm) {
    for (size_t i = 0; i < kCount; ++i) data[r][i] = Input(r, i);
    OPTCAST_RETURN_IF_ERROR(comm.AllReduce(data[r].data(), data[r].data(), kCount, DataType::kFloat32, RedOp::kSum));
    // The job goes on over the two servers left.
    std::vector<float> more(kCount, static_cast<float>(r + 1)), sum(kCount);
    OPTCAST_RETURN_IF_ERROR(comm.AllReduce(more.data(), sum.data(), kCount, DataType::kFloat32, RedOp::kSum));
    if (sum[0] != 3.0f || sum[kCount - 1] != 3.0f) return InternalError("the second sum is wrong");
    servers_left[r] = comm.failover_stats().servers_left;
    return Status::Ok();
  });
  ASSERT_TRUE(dying.Join()) << dying.what();
  ASSERT_GT(cut_elems.load(), 0u);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(servers_left[r], 2u) << "rank " << r;
    size_t wrong = 0;
    for (size_t i = 0; i < kCount; ++i) wrong += data[r][i] != want[i];
    EXPECT_EQ(wrong, 0u) << "rank " << r << ": elements differ from the sum of the inputs";
  }
}

TEST(E2eFailoverMidResult, AServerDyingHalfwayThroughAnInPlaceResultLeavesEveryRankTheExactSum) {
  ExpectExactSumAfterADeathMidResult(DataType::kFloat32);
}

// The same death with float32 on a bfloat16 wire: the rank's rounded input in the staging buffer
// survives the half result, and every rank gets the contract's bits.
TEST(E2eFailoverMidResult, OnABf16WireEveryRankGetsTheContractsSumAfterTheDeath) {
  ExpectExactSumAfterADeathMidResult(DataType::kBFloat16);
}

}  // namespace
}  // namespace optcast::e2e
