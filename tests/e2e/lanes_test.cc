// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Lanes (--io-threads): what a server of several event loops says to hellos it cannot serve. The
// collectives over lanes are in collectives_test.cc (E2eLanes.*), failover in failover_test.cc.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "checks.h"
#include "harness.h"
#include "raw_client.h"
#include "transport/message.h"
#include "wire/protocol.h"

namespace optcast::e2e {
namespace {

// Reads one frame and returns its meta ("" when none came).
std::vector<uint8_t> ReadMeta(int fd) {
  uint8_t h[transport::kFrameHeaderSize];
  size_t got = 0;
  while (got < sizeof(h)) {
    const ssize_t n = ::recv(fd, h + got, sizeof(h) - got, 0);
    if (n <= 0) return {};
    got += static_cast<size_t>(n);
  }
  uint32_t meta_len = 0;
  std::memcpy(&meta_len, h + 4, 4);
  std::vector<uint8_t> meta(meta_len);
  got = 0;
  while (got < meta_len) {
    const ssize_t n = ::recv(fd, meta.data() + got, meta_len - got, 0);
    if (n <= 0) return {};
    got += static_cast<size_t>(n);
  }
  return meta;
}

// A client of the release before lanes (protocol version 4, a hello without a lane) is refused
// in its own version's framing, with both versions and the fix.
TEST(E2eLanesProtocol, AnOldVersionHelloGetsAVersionErrorItCanRead) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, WithLanes(2)));
  const int fd = RawConnect(farm.port(0));
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> meta = HelloMeta(JobId::Random(), 2, 0);
  meta.resize(meta.size() - 4);  // version 4's hello had no lane
  meta[0] = 4;
  ASSERT_TRUE(SendRaw(fd, Frame(meta, 0)));
  const std::vector<uint8_t> reply = ReadMeta(fd);
  ::close(fd);
  ASSERT_GE(reply.size(), 4u);
  EXPECT_EQ(wire::VersionOf(reply), 4) << "framed for the old client";
  wire::Message msg;
  ASSERT_TRUE(wire::Decode(reply, &msg).ok());
  ASSERT_EQ(msg.type, wire::MsgType::kError);
  EXPECT_EQ(msg.error.code, Code::kProtocol);
  EXPECT_NE(msg.error.text.find("version 4"), std::string::npos) << msg.error.text;
  EXPECT_NE(msg.error.text.find("version 5"), std::string::npos) << msg.error.text;
  EXPECT_NE(msg.error.text.find("same Optcast release"), std::string::npos) << msg.error.text;
  EXPECT_EQ(farm.WaitIdle(), "");
}

TEST(E2eLanesProtocol, AHelloForALaneTheServerLacksIsRefused) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, WithLanes(2)));
  wire::Hello h;
  h.job_id = JobId::Random().bytes;
  h.nranks = 2;
  h.lane = 2;
  const int fd = RawConnect(farm.port(0));
  ASSERT_TRUE(SendRaw(fd, Frame(wire::EncodeHello(h), 0)));
  ExpectErrorThenClose(fd, Code::kInvalidArgument, {"lane 2", "2 lanes"}, "lane out of range");
  ::close(fd);
  EXPECT_EQ(farm.WaitIdle(), "");
}

// A server of several lanes takes downstream servers (a tree's root, on lane 0) and ranks (on
// every lane), but not both in one job: a tree job is combined in one place.
TEST(E2eLanesProtocol, AJobOnAServerOfSeveralLanesHasRanksOrDownstreamServersNotBoth) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, WithLanes(2)));
  auto hello = [](const JobId& job, uint32_t flags) {
    wire::Hello h;
    h.job_id = job.bytes;
    h.nranks = 2;
    h.flags = flags;
    return Frame(wire::EncodeHello(h), 0);
  };
  auto expect_welcome = [](int fd, const char* what) {
    const std::vector<uint8_t> reply = ReadMeta(fd);
    wire::Message msg;
    ASSERT_TRUE(wire::Decode(reply, &msg).ok()) << what;
    EXPECT_EQ(msg.type, wire::MsgType::kWelcome) << what << ": " << msg.error.text;
  };
  // A job of downstream servers only: welcomed, as a root's.
  const JobId tree_job = JobId::Random();
  const int child = RawConnect(farm.port(0));
  ASSERT_TRUE(SendRaw(child, hello(tree_job, wire::kHelloFromServer)));
  expect_welcome(child, "a downstream server");
  // A rank of that job: refused, naming the fix.
  const int rank_fd = RawConnect(farm.port(0));
  ASSERT_TRUE(SendRaw(rank_fd, hello(tree_job, 0)));
  ExpectErrorThenClose(rank_fd, Code::kInvalidArgument, {"2 lanes", "--io-threads 1", "--topology"}, "a rank");
  // And the other way round: a downstream server of a job that has a rank here.
  const JobId flat_job = JobId::Random();
  const int first = RawConnect(farm.port(0));
  ASSERT_TRUE(SendRaw(first, hello(flat_job, 0)));
  expect_welcome(first, "a rank");
  const int late_child = RawConnect(farm.port(0));
  ASSERT_TRUE(SendRaw(late_child, hello(flat_job, wire::kHelloFromServer)));
  ExpectErrorThenClose(late_child, Code::kInvalidArgument, {"2 lanes", "--io-threads 1"}, "a downstream server");
  for (int fd : {child, rank_fd, first, late_child}) ::close(fd);
  EXPECT_EQ(farm.WaitIdle(), "");
}

// A member's second hello, whatever lane it names, is a protocol error that takes the member out
// of its job: the job ends with its connection instead of waiting for it.
TEST(E2eLanesProtocol, ASecondHelloNamingAnotherLaneEndsTheMembersJob) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, WithLanes(1)));
  wire::Hello h;
  h.job_id = JobId::Random().bytes;
  h.nranks = 1;
  const int fd = RawConnect(farm.port(0));
  ASSERT_TRUE(SendRaw(fd, Frame(wire::EncodeHello(h), 0)));
  wire::Message welcome;
  ASSERT_TRUE(wire::Decode(ReadMeta(fd), &welcome).ok());
  ASSERT_EQ(welcome.type, wire::MsgType::kWelcome);
  h.lane = 791621423;
  ASSERT_TRUE(SendRaw(fd, Frame(wire::EncodeHello(h), 0)));
  ExpectErrorThenClose(fd, Code::kProtocol, {"second hello"}, "a second hello");
  ::close(fd);
  EXPECT_EQ(farm.WaitIdle(), "");
}

// Hellos for every lane are authenticated, each by the lane that serves it.
TEST(E2eLanesProtocol, EveryLanesHelloProvesTheSecret) {
  server::ServerOptions o = WithLanes(3);
  o.secret = "a secret of the deployment, long enough";
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Start(1, o));
  CommConfig right;
  right.secret = o.secret;
  ExpectAllOk(RunAllReduceOnThreads(farm.addresses(), 2, 100000, right, 7));
  CommConfig wrong;
  wrong.secret = "another secret, just as long as that";
  for (const Status& st : RunAllReduceOnThreads(farm.addresses(), 2, 1000, wrong, 8)) {
    EXPECT_EQ(st.code(), Code::kUnauthenticated) << st.ToString();
  }
  EXPECT_GE(farm.server(0).stats().auth_failures, 2u);
  EXPECT_EQ(farm.WaitIdle(), "");
}

}  // namespace
}  // namespace optcast::e2e
