// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Authentication and isolation: hellos must prove the deployment secret, and no job can take more
// than its share (memory, connections, chunks in flight) or disturb another.

#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "auth/proof.h"
#include "checks.h"
#include "harness.h"
#include "raw_client.h"
#include "server/job.h"
#include "wire/protocol.h"

namespace optcast::e2e {
namespace {

const char kSecret[] = "0123456789abcdef-deployment-secret";

CommConfig Config(std::string secret = "") {
  CommConfig c;
  c.timeout = milliseconds(8000);
  c.connect_timeout = milliseconds(3000);
  c.secret = std::move(secret);
  return c;
}

server::ServerOptions SecuredOptions() {
  server::ServerOptions o = TestServerOptions();
  o.secret = kSecret;
  return o;
}

// ---------------------------------------------------------------------------------------------
// Authentication

TEST(E2eSecurity, RanksWithTheSecretComputeTheRightSum) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(2, SecuredOptions()));
  ExpectAllOk(RunAllReduceOnThreads(farm.addresses(), 3, 100003, Config(kSecret), 7001));
  EXPECT_EQ(farm.server(0).stats().auth_failures, 0u);
  EXPECT_EQ(farm.WaitIdle(), "");
}

TEST(E2eSecurity, WrongOrMissingSecretIsRefusedCountedAndHarmless) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, SecuredOptions()));
  const JobId job = JobId::Random();
  std::unique_ptr<Communicator> comm;

  Status wrong = MakeComm(farm.addresses(), job, 2, 1, Config("another-secret-of-enough-length"), &comm);
  EXPECT_EQ(wrong.code(), Code::kUnauthenticated) << wrong.ToString();
  EXPECT_NE(wrong.message().find("authentication failed"), std::string::npos) << wrong.ToString();
  EXPECT_NE(wrong.message().find("OPTCAST_SECRET_FILE"), std::string::npos) << wrong.ToString();

  Status missing = MakeComm(farm.addresses(), job, 2, 1, Config(""), &comm);
  EXPECT_EQ(missing.code(), Code::kUnauthenticated) << missing.ToString();
  EXPECT_NE(missing.message().find("requires authentication"), std::string::npos) << missing.ToString();

  EXPECT_TRUE(WaitFor([&] { return farm.server(0).stats().auth_failures == 2; }))
      << "auth failures counted: " << farm.server(0).stats().auth_failures;
  // The refused hellos took no rank: the job can still be formed by ranks with the secret.
  ExpectAllOk(RunAllReduceOnThreads(farm.addresses(), 2, 5000, Config(kSecret), 7002));
}

TEST(E2eSecurity, AProofIsGoodForItsOwnChallengeAndHelloOnly) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, SecuredOptions()));
  const uint16_t port = farm.port(0);
  const JobId job = JobId::Random();
  wire::Hello hello;
  hello.job_id = job.bytes;
  hello.nranks = 2;
  hello.rank = 0;

  auto challenge = [&](int fd, const wire::Hello& h) {
    EXPECT_TRUE(SendRaw(fd, Frame(wire::EncodeHello(h), 0)));
    RawReply r = ReadReply(fd);
    EXPECT_EQ(r.kind, RawReply::kFrame) << r.detail;
    EXPECT_EQ(r.msg.type, wire::MsgType::kChallenge);
    return r.msg.challenge;
  };

  // A proof recorded on one connection does not open another (a new nonce each time).
  const int first = RawConnect(port);
  ASSERT_GE(first, 0);
  const wire::Nonce n1 = challenge(first, hello);
  const int second = RawConnect(port);
  ASSERT_GE(second, 0);
  const wire::Nonce n2 = challenge(second, hello);
  EXPECT_NE(n1, n2);
  ASSERT_TRUE(SendRaw(second, Frame(wire::EncodeProof(auth::ComputeProof(kSecret, n1, hello)), 0)));
  ExpectErrorThenClose(second, Code::kUnauthenticated, {"authentication failed", "rank 0"}, "replayed proof");
  ::close(second);

  // A proof for another rank does not admit this hello.
  wire::Hello other = hello;
  other.rank = 1;
  ASSERT_TRUE(SendRaw(first, Frame(wire::EncodeProof(auth::ComputeProof(kSecret, n1, other)), 0)));
  ExpectErrorThenClose(first, Code::kUnauthenticated, {"authentication failed"}, "proof for another rank");
  ::close(first);

  // Data instead of a proof is refused too.
  const int third = RawConnect(port);
  ASSERT_GE(third, 0);
  challenge(third, hello);
  wire::Chunk c;
  c.desc.count = 1;
  c.desc.server_elems = 1;
  c.ref.count = 1;
  ASSERT_TRUE(SendRaw(third, Concat(Frame(wire::EncodeChunk(c), 4), std::vector<uint8_t>(4, 0))));
  ExpectErrorThenClose(third, Code::kProtocol, {"hello"}, "data before the proof");
  ::close(third);

  // The right proof on its own connection is welcomed.
  const int good = RawConnect(port);
  ASSERT_GE(good, 0);
  const wire::Nonce n4 = challenge(good, hello);
  ASSERT_TRUE(SendRaw(good, Frame(wire::EncodeProof(auth::ComputeProof(kSecret, n4, hello)), 0)));
  RawReply w = ReadReply(good);
  ASSERT_EQ(w.kind, RawReply::kFrame) << w.detail;
  EXPECT_EQ(w.msg.type, wire::MsgType::kWelcome);
  ::close(good);
  EXPECT_TRUE(WaitFor([&] { return farm.server(0).stats().auth_failures == 3; }))
      << farm.server(0).stats().auth_failures;
}

TEST(E2eSecurity, WithoutASecretTheServerStaysOnLoopbackUnlessToldOtherwise) {
  server::ServerOptions o = TestServerOptions();
  o.listen = {"0.0.0.0", 0};
  {
    server::Server s(o);
    Status st = s.Start();
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find("OPTCAST_SECRET_FILE"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("--insecure"), std::string::npos) << st.ToString();
  }
  o.insecure = true;
  {
    server::Server s(o);
    EXPECT_TRUE(s.Start().ok());
  }
  o.insecure = false;
  o.secret = kSecret;
  {
    server::Server s(o);
    EXPECT_TRUE(s.Start().ok());
  }
}

// ---------------------------------------------------------------------------------------------
// Limits: each refuses with an error naming the limit, and other jobs carry on.

void RunOverMemoryLimit(uint64_t server_limit, uint64_t job_limit, const char* named) {
  server::ServerOptions o = TestServerOptions();
  o.memory_limit = server_limit;
  o.job_memory_limit = job_limit;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, o));
  // Two ranks' 64 KiB chunks must be held at once to be reduced: with the state the job is charged
  // for, more than a 128 KiB limit, however fast the server reduces and answers.
  CommConfig big = Config();
  big.chunk_bytes = 64 << 10;
  const auto st = RunAllReduceOnThreads(farm.addresses(), 2, 4 << 20, big, 7003);
  for (size_t r = 0; r < st.size(); ++r) {
    EXPECT_EQ(st[r].code(), Code::kResourceExhausted) << "rank " << r << ": " << st[r].ToString();
    EXPECT_NE(st[r].message().find(named), std::string::npos) << "rank " << r << ": " << st[r].ToString();
  }
  EXPECT_EQ(farm.server(0).stats().limit_failures, 1u);
  // A job that fits runs on the same server, and nothing of the failed one is left.
  ExpectAllOk(RunAllReduceOnThreads(farm.addresses(), 2, 1000, Config(), 7004));
  EXPECT_EQ(farm.WaitIdle(), "");
  EXPECT_EQ(farm.server(0).stats().memory_used, 0u);
}

TEST(E2eSecurity, AJobOverItsMemoryLimitFailsAloneNamingTheLimit) {
  RunOverMemoryLimit(uint64_t{1} << 30, 128 << 10, "--job-memory-limit=128K");
}

TEST(E2eSecurity, TheServerMemoryLimitHoldsAcrossJobs) {
  RunOverMemoryLimit(128 << 10, uint64_t{1} << 30, "--memory-limit=128K");
}

TEST(E2eSecurity, ConnectionsOverTheLimitAreRefusedNamingIt) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  server::ServerOptions o = TestServerOptions();
  o.max_connections = 2;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, o));
  const int a = RawConnect(farm.port(0));
  const int b = RawConnect(farm.port(0));
  ASSERT_TRUE(a >= 0 && b >= 0);
  ASSERT_TRUE(WaitFor([&] { return farm.server(0).stats().connections == 2; }));
  const int c = RawConnect(farm.port(0));
  ExpectErrorThenClose(c, Code::kResourceExhausted, {"--max-connections=2"}, "third connection");
  ::close(c);
  EXPECT_EQ(farm.server(0).stats().connections_refused, 1u);
  ::close(a);
  ::close(b);
  // With the slots free again a job runs.
  ASSERT_TRUE(WaitFor([&] { return farm.server(0).stats().connections == 0; }));
  ExpectAllOk(RunAllReduceOnThreads(farm.addresses(), 2, 1000, Config(), 7005));
}

wire::Chunk OneElementChunk(CollType coll, uint64_t seq, uint32_t segment, uint32_t nranks) {
  wire::Chunk c;
  c.desc.coll_seq = seq;
  c.desc.coll = coll;
  c.desc.dtype = DataType::kInt32;
  c.desc.op = RedOp::kSum;
  c.desc.count = 1;
  c.desc.server_elems = coll == CollType::kAllReduce ? 1 : nranks;
  c.ref.segment = segment;
  c.ref.offset = coll == CollType::kAllReduce ? 0 : segment;
  c.ref.count = 1;
  return c;
}

std::vector<uint8_t> ChunkFrame(const wire::Chunk& c) {
  return Concat(Frame(wire::EncodeChunk(c), 4), std::vector<uint8_t>(4, 1));
}

// A bitwise op on a float type: the client refuses it before sending, and a server that gets one
// anyway fails the job with a protocol error naming the op and the type.
TEST(E2eSecurity, ABitwiseOpOnAFloatTypeIsRefusedByClientAndServer) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, TestServerOptions()));
  const int fd = RawConnect(farm.port(0));
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendRaw(fd, Frame(HelloMeta(JobId::Random(), 1, 0), 0)));
  ASSERT_EQ(ReadReply(fd).msg.type, wire::MsgType::kWelcome);
  wire::Chunk c = OneElementChunk(CollType::kAllReduce, 0, 0, 1);
  c.desc.dtype = DataType::kFloat32;
  c.desc.op = RedOp::kBand;
  ASSERT_TRUE(SendRaw(fd, ChunkFrame(c)));
  ExpectErrorThenClose(fd, Code::kProtocol, {"band", "float32", "integer"}, "band of float32");
  ::close(fd);

  std::unique_ptr<Communicator> comm;
  E2E_ASSERT_OK(MakeComm(farm.addresses(), JobId::Random(), 1, 0, CommConfig{}, &comm));
  float x[3] = {1, 2, 3};
  const Status st = comm->AllReduce(x, x, 3, DataType::kFloat64, RedOp::kBxor);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("float64"), std::string::npos) << st.message();
  // The same communicator goes on: an integer bxor of one rank is its own value.
  int32_t v[2] = {5, -7};
  E2E_ASSERT_OK(comm->AllReduce(v, v, 2, DataType::kInt32, RedOp::kBxor));
  EXPECT_EQ(v[0], 5);
  EXPECT_EQ(v[1], -7);
  comm.reset();
  EXPECT_EQ(farm.WaitIdle(), "");
}

TEST(E2eSecurity, ARankRunningAheadOfItsJobIsStoppedAtTheOpenChunkLimit) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  server::ServerOptions o = TestServerOptions();
  o.max_open_chunks_per_rank = 4;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, o));
  const int fd = RawConnect(farm.port(0));
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendRaw(fd, Frame(HelloMeta(JobId::Random(), 2, 0), 0)));
  ASSERT_EQ(ReadReply(fd).msg.type, wire::MsgType::kWelcome);
  // Rank 1 never comes: five collectives opened by rank 0 alone.
  std::vector<uint8_t> burst;
  for (uint64_t seq = 0; seq < 5; ++seq)
    burst = Concat(burst, ChunkFrame(OneElementChunk(CollType::kAllReduce, seq, 0, 2)));
  ASSERT_TRUE(SendRaw(fd, burst));
  ExpectErrorThenClose(fd, Code::kResourceExhausted, {"--max-open-chunks=4", "rank 0"}, "five open chunks");
  ::close(fd);
  EXPECT_EQ(farm.WaitIdle(), "");
}

// Found by fuzzing: an all-gather chunk waited for each absent rank in a message of its own, so a
// few kilobytes from one rank of a large job made the server allocate gigabytes.
TEST(E2eSecurity, AllGatherDataForAbsentRanksIsHeldOncePerChunk) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1));
  const int fd = RawConnect(farm.port(0));
  ASSERT_GE(fd, 0);
  constexpr uint32_t kRanks = 8192;
  constexpr int kChunks = 200;
  ASSERT_TRUE(SendRaw(fd, Frame(HelloMeta(JobId::Random(), kRanks, 0), 0)));
  ASSERT_EQ(ReadReply(fd).msg.type, wire::MsgType::kWelcome);
  std::vector<uint8_t> burst;
  for (uint64_t seq = 0; seq < kChunks; ++seq) {
    burst = Concat(burst, ChunkFrame(OneElementChunk(CollType::kAllGather, seq, 0, kRanks)));
  }
  ASSERT_TRUE(SendRaw(fd, burst));
  ASSERT_TRUE(WaitFor([&] { return farm.server(0).stats().chunks_reduced >= kChunks; }))
      << farm.server(0).stats().chunks_reduced;
  // Per collective: its state (at most an entry per rank) and one 4 KiB buffer; nothing per absent rank.
  const uint64_t bound = kChunks * (server::CollStateBytes(kRanks) + 4096 + 1024);
  EXPECT_LE(farm.server(0).stats().memory_used, bound);
  // The server stays responsive for other jobs meanwhile.
  const auto t0 = Clock::now();
  ExpectAllOk(RunAllReduceOnThreads(farm.addresses(), 2, 1000, Config(), 7006));
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
  ::close(fd);
  EXPECT_EQ(farm.WaitIdle(), "");
  EXPECT_EQ(farm.server(0).stats().memory_used, 0u);
}

}  // namespace
}  // namespace optcast::e2e
