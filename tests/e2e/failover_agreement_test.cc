// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// How servers agree on a failover when the server that announces it dies too: ranks speak the
// failover messages byte for byte to two real servers, so that the order of events is fixed.

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "checks.h"
#include "harness.h"
#include "raw_client.h"

namespace optcast::e2e {
namespace {

// The next frame other than a heartbeat or a notice of dead servers (a rank that has not reported
// yet gets one when another rank reports), or a timeout after `limit`.
RawReply NextMessage(int fd, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
      RawReply timeout;
      timeout.kind = RawReply::kTimeout;
      return timeout;
    }
    RawReply r = ReadReply(fd);
    if (r.kind != RawReply::kFrame ||
        (r.msg.type != wire::MsgType::kHeartbeat && r.msg.type != wire::MsgType::kNotice)) {
      return r;
    }
  }
}

// Rank `rank` of `nranks` of `job`, connected to the server at `port` and welcomed.
void JoinRaw(uint16_t port, const JobId& job, uint32_t nranks, uint32_t rank, int* fd) {
  *fd = RawConnect(port);
  ASSERT_GE(*fd, 0);
  ASSERT_TRUE(SendRaw(*fd, Frame(HelloMeta(job, nranks, rank), 0)));
  ASSERT_EQ(NextMessage(*fd, milliseconds(5000)).msg.type, wire::MsgType::kWelcome);
}

std::vector<uint8_t> ReportFrame(uint32_t epoch, uint32_t server_index, uint64_t dead_mask) {
  wire::FailoverReport r;
  r.epoch = epoch;
  r.server_index = server_index;
  r.dead_mask = dead_mask;
  r.first_unplanned = 0;
  return Frame(wire::EncodeFailover(r), 0);
}

// The ranks list servers [A, B, C]; A is dead from the start. Both ranks report it: B, first
// left, announces failover 1 and C, which agrees, keeps quiet. Rank 1 then loses B before B's
// announcement reached it and reports A and B dead from epoch 0: C, now first left, must
// announce failover 1 again (rank 1 would otherwise wait for it until its timeout), while a
// report from epoch 0 that leaves B alive gets no answer.
TEST(E2eFailoverAgreement, WhenTheAnnouncerDiesTooTheNextServerLeftAnnouncesAgain) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;  // server 0 is B (place 1 in the ranks' list), server 1 is C (place 2)
  E2E_ASSERT_OK(farm.Start(2, TestServerOptions()));
  const JobId job = JobId::Random();
  int fd[2][2];  // [rank][server]
  for (uint32_t r = 0; r < 2; ++r) {
    for (int s = 0; s < 2; ++s) {
      ASSERT_NO_FATAL_FAILURE(JoinRaw(farm.port(s), job, 2, r, &fd[r][s]));
    }
  }
  constexpr uint64_t kA = 1, kB = 2;
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(SendRaw(fd[r][0], ReportFrame(0, 1, kA)));
    ASSERT_TRUE(SendRaw(fd[r][1], ReportFrame(0, 2, kA)));
  }
  for (uint32_t r = 0; r < 2; ++r) {
    const RawReply a = NextMessage(fd[r][0], milliseconds(5000));
    ASSERT_EQ(a.msg.type, wire::MsgType::kAgreed) << "rank " << r << ": " << a.detail;
    EXPECT_EQ(a.msg.agreed.epoch, 1u);
    EXPECT_EQ(a.msg.agreed.dead_mask, kA);
  }
  // C is not first left while B lives: it announces nothing, and a report that still has B alive
  // does not change that.
  ASSERT_TRUE(SendRaw(fd[0][1], ReportFrame(0, 2, kA)));
  EXPECT_EQ(NextMessage(fd[0][1], milliseconds(600)).kind, RawReply::kTimeout);

  ASSERT_TRUE(SendRaw(fd[1][1], ReportFrame(0, 2, kA | kB)));
  const RawReply again = NextMessage(fd[1][1], milliseconds(5000));
  ASSERT_EQ(again.msg.type, wire::MsgType::kAgreed) << again.detail;
  EXPECT_EQ(again.msg.agreed.epoch, 1u);
  EXPECT_EQ(again.msg.agreed.dead_mask, kA) << "the failover the job agreed on, not a new one";
  EXPECT_EQ(again.msg.agreed.boundary, 0u);
  // Rank 0, which did get B's announcement, hears nothing more from C.
  EXPECT_EQ(NextMessage(fd[0][1], milliseconds(300)).kind, RawReply::kTimeout);
  for (auto& per_rank : fd) {
    for (int f : per_rank) ::close(f);
  }
}

// A server that agreed quietly (not first left) must not re-announce that agreement to one rank
// because a late report places it first in that rank's list: the others never heard it, so the
// ranks would act on different failovers. A rank whose list puts this server elsewhere than the
// agreeing ranks did has a different list: the job fails, naming both places.
TEST(E2eFailoverAgreement, ALateReportPlacingThisServerElsewhereFailsTheJob) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;  // at place 2 of the ranks' lists [A, B, C]
  E2E_ASSERT_OK(farm.Start(1, TestServerOptions()));
  const JobId job = JobId::Random();
  int fd[2];
  for (uint32_t r = 0; r < 2; ++r) ASSERT_NO_FATAL_FAILURE(JoinRaw(farm.port(0), job, 2, r, &fd[r]));
  constexpr uint64_t kA = 1;
  for (uint32_t r = 0; r < 2; ++r) ASSERT_TRUE(SendRaw(fd[r], ReportFrame(0, 2, kA)));
  // B is first left and announces; this server agrees and keeps quiet.
  EXPECT_EQ(NextMessage(fd[0], milliseconds(600)).kind, RawReply::kTimeout);
  // Rank 0 now reports from epoch 0 with this server at place 0, as if it were its first server.
  ASSERT_TRUE(SendRaw(fd[0], ReportFrame(0, 0, uint64_t{1} << 1)));
  for (uint32_t r = 0; r < 2; ++r) {
    const RawReply e = NextMessage(fd[r], milliseconds(5000));
    ASSERT_EQ(e.msg.type, wire::MsgType::kError) << "rank " << r << ": " << e.detail;
    EXPECT_NE(e.msg.error.text.find("lists this server at place 0, the other ranks at 2"), std::string::npos)
        << e.msg.error.text;
  }
  for (int f : fd) ::close(f);
}

// The first Error frame, skipping what a live job sends meanwhile (heartbeats, notices, epochs),
// or a timeout after `limit`.
RawReply NextError(int fd, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    RawReply r = NextMessage(fd, std::max(left, milliseconds(0)));
    if (r.kind != RawReply::kFrame || r.msg.type == wire::MsgType::kError) return r;
  }
}

// One int32 element of collective #seq, striped at failover epoch `epoch`.
std::vector<uint8_t> ChunkAtEpoch(uint64_t seq, uint32_t epoch) {
  wire::Chunk c;
  c.desc.coll_seq = seq;
  c.desc.coll = CollType::kAllReduce;
  c.desc.dtype = DataType::kInt32;
  c.desc.op = RedOp::kSum;
  c.desc.count = 1;
  c.desc.server_elems = 1;
  c.desc.epoch = epoch;
  c.ref.count = 1;
  return Concat(Frame(wire::EncodeChunk(c), 4), std::vector<uint8_t>(4, 1));
}

// Two ranks may never stripe one collective differently. A chunk from an epoch the job has not
// reached is refused on its own connection; once the job is at epoch 1, a collective that one
// rank striped before the failover and the other after it fails the job for both ranks, naming
// the epochs.
TEST(E2eFailoverAgreement, AServerRefusesAMixOfEpochs) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, TestServerOptions()));
  {  // An epoch ahead of the job's.
    const JobId job = JobId::Random();
    int fd = -1;
    ASSERT_NO_FATAL_FAILURE(JoinRaw(farm.port(0), job, 2, 0, &fd));
    ASSERT_TRUE(SendRaw(fd, ChunkAtEpoch(0, 1)));
    const RawReply e = NextError(fd, milliseconds(5000));
    ASSERT_EQ(e.kind, RawReply::kFrame) << e.detail;
    EXPECT_EQ(e.msg.error.code, Code::kProtocol) << e.msg.error.text;
    EXPECT_NE(e.msg.error.text.find("striped at failover epoch 1 before moving the job there (this server is at "
                                    "epoch 0)"),
              std::string::npos)
        << e.msg.error.text;
    ::close(fd);
  }
  const JobId job = JobId::Random();
  int fd[2];
  for (uint32_t r = 0; r < 2; ++r) ASSERT_NO_FATAL_FAILURE(JoinRaw(farm.port(0), job, 2, r, &fd[r]));
  // Rank 0 applies failover 1 (server 1 of the list dead, collectives from #5 re-striped).
  wire::EpochChange change;
  change.epoch = 1;
  change.dead_mask = 2;
  change.boundary = 5;
  ASSERT_TRUE(SendRaw(fd[0], Frame(wire::EncodeEpoch(change), 0)));
  // The server announces it to every rank once it has moved the job: only then may a chunk of
  // epoch 1 come.
  for (uint32_t r = 0; r < 2; ++r) {
    const RawReply e = NextMessage(fd[r], milliseconds(5000));
    ASSERT_EQ(e.msg.type, wire::MsgType::kEpoch) << "rank " << r << ": " << e.detail;
  }
  // Collective #2 comes before the boundary, so neither chunk is stale: rank 0 sends it as
  // striped at epoch 0, rank 1 as striped at epoch 1.
  ASSERT_TRUE(SendRaw(fd[0], ChunkAtEpoch(2, 0)));
  ASSERT_TRUE(SendRaw(fd[1], ChunkAtEpoch(2, 1)));
  for (uint32_t r = 0; r < 2; ++r) {
    const RawReply e = NextError(fd[r], milliseconds(5000));
    ASSERT_EQ(e.kind, RawReply::kFrame) << "rank " << r << ": " << e.detail;
    EXPECT_EQ(e.msg.error.code, Code::kMismatch) << "rank " << r << ": " << e.msg.error.text;
    // Whichever chunk the server read first opened the collective.
    const std::string& text = e.msg.error.text;
    EXPECT_TRUE(text.find("failover epoch: rank 0 striped it after 0 failover(s), rank 1 after 1") !=
                    std::string::npos ||
                text.find("failover epoch: rank 1 striped it after 1 failover(s), rank 0 after 0") != std::string::npos)
        << "rank " << r << ": " << text;
    EXPECT_NE(text.find("did not agree on the servers left"), std::string::npos) << text;
  }
  for (int f : fd) ::close(f);
}

}  // namespace
}  // namespace optcast::e2e
