// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Traffic classes (transport/posix/traffic_class.h): the DSCP a socket marks with, switched per
// message, never ahead of bytes still in flight; and the server path marking latency-bound
// collectives at both ends while large ones go unmarked. Checked on real loopback sockets with
// getsockopt(IP_TOS), which reads back what the kernel puts in every packet's header.

#include "transport/posix/traffic_class.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "checks.h"
#include "harness.h"
#include "transport/message.h"
#include "transport/posix/socket.h"
#include "transport/tcp/connection.h"

namespace optcast::e2e {
namespace {

int TosOf(int fd) {
  int tos = -1;
  socklen_t len = sizeof(tos);
  if (getsockopt(fd, IPPROTO_IP, IP_TOS, &tos, &len) != 0) return -1;
  return tos;
}

// A connected pair of loopback TCP sockets: {client, accepted}.
struct Pair {
  int a = -1, b = -1;
  ~Pair() {
    if (a >= 0) close(a);
    if (b >= 0) close(b);
  }
};

void Connect(Pair* p) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  p->a = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(p->a, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  p->b = accept(listener, nullptr, nullptr);
  close(listener);
  ASSERT_GE(p->b, 0);
}

TEST(TrafficClass, MarksAndUnmarksAnIdleSocket) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  transport::posix::TrafficClass tc(p.a);
  EXPECT_EQ(TosOf(p.a), 0);
  tc.Prepare(46);
  EXPECT_EQ(tc.current(), 46);
  EXPECT_EQ(TosOf(p.a), 46 << 2);
  tc.Prepare(0);
  EXPECT_EQ(tc.current(), 0);
  EXPECT_EQ(TosOf(p.a), 0);
}

// Bytes the peer has not acknowledged would be overtaken by marked ones: the socket stays in
// the default class until they are, and leaves a marked class at once.
TEST(TrafficClass, NeverMarksAheadOfBytesInFlight) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  int small = 4096;
  ASSERT_EQ(setsockopt(p.b, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  // Fill the peer's receive window (it never reads), so that what is left stays unacknowledged.
  std::vector<char> block(64 * 1024, 'x');
  while (send(p.a, block.data(), block.size(), MSG_DONTWAIT) > 0) {
  }
  ASSERT_GT(transport::posix::UnacknowledgedBytes(p.a), 0);
  transport::posix::TrafficClass tc(p.a);
  tc.Prepare(46);
  EXPECT_EQ(tc.current(), 0);
  EXPECT_EQ(TosOf(p.a), 0);

  Pair q;
  ASSERT_NO_FATAL_FAILURE(Connect(&q));
  transport::posix::TrafficClass marked(q.a);
  marked.Prepare(46);
  ASSERT_EQ(TosOf(q.a), 46 << 2);
  ASSERT_EQ(setsockopt(q.b, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  while (send(q.a, block.data(), block.size(), MSG_DONTWAIT) > 0) {
  }
  marked.Prepare(0);
  EXPECT_EQ(TosOf(q.a), 0);
}

TEST(TrafficClass, ASettingIsADscpOrOff) {
  int v = -1;
  EXPECT_TRUE(transport::posix::ParseDscp("46", "X", &v).ok());
  EXPECT_EQ(v, 46);
  EXPECT_TRUE(transport::posix::ParseDscp("off", "X", &v).ok());
  EXPECT_EQ(v, 0);
  for (const char* bad : {"64", "-1", "ef", "", "4 6", " 46", "+46", "460"}) {
    const Status st = transport::posix::ParseDscp(bad, "OPTCAST_LATENCY_DSCP", &v);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("OPTCAST_LATENCY_DSCP='"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("0-63"), std::string::npos) << st.ToString();
  }
}

// A connection writes each class in writes of its own, and control messages (kUnchanged) do not
// move it: the socket's mark after each flush is the last class asked for.
TEST(TrafficClass, AConnectionSwitchesPerMessage) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  const int fd = p.a;
  p.a = -1;  // the connection owns it now
  transport::tcp::StreamConnection conn(transport::posix::Socket(fd), 1 << 20, "peer",
                                        transport::TcpOptions{.latency_dscp = 46});
  using transport::TrafficClass;
  uint8_t next = 0;
  auto send = [&](TrafficClass c) {
    const uint8_t meta[4] = {++next, 2, 3, 4};
    transport::OutMessage m = transport::MakeOutMessage(meta, nullptr, 0);
    m.traffic_class = c;
    conn.Send(std::move(m));
  };
  send(TrafficClass::kLatency);
  ASSERT_TRUE(conn.Flush().ok());
  EXPECT_EQ(TosOf(fd), 46 << 2);
  send(TrafficClass::kUnchanged);
  ASSERT_TRUE(conn.Flush().ok());
  EXPECT_EQ(TosOf(fd), 46 << 2);
  send(TrafficClass::kBulk);
  send(TrafficClass::kUnchanged);
  ASSERT_TRUE(conn.Flush().ok());
  EXPECT_EQ(TosOf(fd), 0);
  // Two classes in one flush: two writes, the second class last.
  send(TrafficClass::kLatency);
  send(TrafficClass::kUnchanged);
  send(TrafficClass::kBulk);
  ASSERT_TRUE(conn.Flush().ok());
  EXPECT_FALSE(conn.HasPendingWrites());
  EXPECT_EQ(TosOf(fd), 0);
  // The peer got every message once, in order: a 16-byte frame header and 4 bytes of meta each.
  const timeval patience{5, 0};  // a lost message fails the test instead of hanging it
  ASSERT_EQ(setsockopt(p.b, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience)), 0);
  std::vector<uint8_t> got(7 * 20);
  size_t have = 0;
  while (have < got.size()) {
    const ssize_t n = recv(p.b, got.data() + have, got.size() - have, 0);
    ASSERT_GT(n, 0);
    have += static_cast<size_t>(n);
  }
  for (int i = 0; i < 7; ++i) EXPECT_EQ(got[i * 20 + 16], i + 1) << i;
}

// The TOS byte of every connected TCP socket of this process with one end on one of `ports`,
// keyed "local->peer" (both ends of each connection: the ranks' and the servers').
std::map<std::string, int> TosOfConnectionsTo(const std::vector<uint16_t>& ports) {
  std::map<std::string, int> out;
  ForEachConnectionTo(ports, [&](int fd, const std::string& key) { out[key] = TosOf(fd); });
  return out;
}

class ServerPathTrafficClass : public ::testing::Test {
 protected:
  void SetUp() override {
    if (OverFabric()) GTEST_SKIP() << "traffic classes are marked on the tcp transport's sockets";
  }

  // Runs 2 ranks over 2 servers, each rank an allreduce of each of `counts` in turn (checked
  // against the reference), and returns the TOS of every connection after the last.
  // `gather` > 0: then an AllGather of that many floats per rank.
  std::map<std::string, int> Run(const server::ServerOptions& so, const CommConfig& cfg,
                                 const std::vector<size_t>& counts, size_t gather = 0) {
    ServerFarm farm;
    EXPECT_TRUE(farm.Start(2, so).ok());
    constexpr int kRanks = 2;
    const JobId job = JobId::Random();
    std::vector<std::unique_ptr<Communicator>> comms(kRanks);
    std::vector<Status> status(kRanks);
    std::vector<std::thread> ranks;
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        Status st = MakeComm(farm.addresses(), job, kRanks, r, cfg, &comms[r]);
        for (size_t i = 0; st.ok() && i < counts.size(); ++i) {
          const size_t n = counts[i];
          std::vector<float> in(n), got(n);
          FillInput(DataType::kFloat32, RedOp::kSum, 31 + i, r, 0, n, in.data());
          st = comms[r]->AllReduce(in.data(), got.data(), n, DataType::kFloat32, RedOp::kSum);
          if (st.ok()) {
            const std::string err = VerifyReduction(got.data(), DataType::kFloat32, RedOp::kSum, 31 + i, kRanks, 0, n);
            if (!err.empty()) st = InternalError(err);
          }
        }
        if (st.ok() && gather > 0) {
          std::vector<float> mine(gather, static_cast<float>(r + 1)), all(gather * kRanks);
          st = comms[r]->AllGather(mine.data(), all.data(), gather, DataType::kFloat32);
          for (size_t i = 0; st.ok() && i < all.size(); ++i) {
            if (all[i] != static_cast<float>(i / gather + 1)) st = InternalError("wrong all-gather element");
          }
        }
        status[r] = st;
      });
    }
    for (auto& t : ranks) t.join();
    ExpectAllOk(status);
    std::vector<uint16_t> ports = {farm.port(0), farm.port(1)};
    auto tos = TosOfConnectionsTo(ports);
    comms.clear();
    return tos;
  }
};

// 2 ranks x 2 servers, each connection seen from both ends.
constexpr size_t kConnectionEnds = 8;

TEST_F(ServerPathTrafficClass, SmallCollectivesAreMarkedAtBothEnds) {
  // 16 KiB: both servers carry a share; 4 of them so that every connection has carried one.
  const auto tos = Run(TestServerOptions(), CommConfig{}, {4096, 4096, 4096, 4096});
  ASSERT_EQ(tos.size(), kConnectionEnds);
  for (const auto& [where, t] : tos) EXPECT_EQ(t, 46 << 2) << where;
}

TEST_F(ServerPathTrafficClass, LargeCollectivesGoUnmarked) {
  const auto tos = Run(TestServerOptions(), CommConfig{}, {4096, 1 << 20});
  ASSERT_EQ(tos.size(), kConnectionEnds);
  for (const auto& [where, t] : tos) EXPECT_EQ(t, 0) << where;
}

// An all-gather's forwarded chunks and acks take its own class, not the connection's last one.
TEST_F(ServerPathTrafficClass, ALargeAllGatherAfterSmallCollectivesGoesUnmarked) {
  const auto tos = Run(TestServerOptions(), CommConfig{}, {4096, 4096}, 1 << 18);
  ASSERT_EQ(tos.size(), kConnectionEnds);
  for (const auto& [where, t] : tos) EXPECT_EQ(t, 0) << where;
}

TEST_F(ServerPathTrafficClass, TheThresholdAndTheDscpAreSettings) {
  server::ServerOptions so = TestServerOptions();
  so.latency_bytes = 8 << 20;
  so.transport.tcp.latency_dscp = 10;
  CommConfig cfg;
  cfg.latency_bytes = 8 << 20;
  cfg.latency_dscp = 10;
  auto tos = Run(so, cfg, {1 << 20});
  ASSERT_EQ(tos.size(), kConnectionEnds);
  for (const auto& [where, t] : tos) EXPECT_EQ(t, 10 << 2) << where;

  so.transport.tcp.latency_dscp = 0;
  cfg.latency_dscp = 0;
  tos = Run(so, cfg, {16});
  ASSERT_EQ(tos.size(), kConnectionEnds);
  for (const auto& [where, t] : tos) EXPECT_EQ(t, 0) << where;
}

TEST_F(ServerPathTrafficClass, ABadSettingIsAClearError) {
  server::ServerOptions so = TestServerOptions();
  so.transport.tcp.latency_dscp = 64;
  ServerFarm refused;
  Status bad = refused.Start(1, so);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("latency_dscp 64 is not a DSCP"), std::string::npos) << bad.ToString();
  CommunicatorOptions co;
  co.servers = {"127.0.0.1:1"};
  co.nranks = 1;
  co.rank = 0;
  co.latency_dscp = -1;
  std::unique_ptr<Communicator> comm;
  bad = Communicator::Create(co, &comm);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("latency_dscp -1 is not a DSCP"), std::string::npos) << bad.ToString();

  setenv("OPTCAST_LATENCY_DSCP", "ef", 1);
  CommunicatorOptions o;
  Status st = ApplyEnvironment(&o);
  unsetenv("OPTCAST_LATENCY_DSCP");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("OPTCAST_LATENCY_DSCP='ef' is not a DSCP"), std::string::npos) << st.ToString();
  setenv("OPTCAST_LATENCY_BYTES", "lots", 1);
  st = ApplyEnvironment(&o);
  unsetenv("OPTCAST_LATENCY_BYTES");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("OPTCAST_LATENCY_BYTES='lots' is not a size"), std::string::npos) << st.ToString();
  setenv("OPTCAST_LATENCY_DSCP", "off", 1);
  setenv("OPTCAST_LATENCY_BYTES", "1M", 1);
  st = ApplyEnvironment(&o);
  unsetenv("OPTCAST_LATENCY_DSCP");
  unsetenv("OPTCAST_LATENCY_BYTES");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(o.latency_dscp, 0);
  EXPECT_EQ(o.latency_bytes, size_t{1} << 20);
}

}  // namespace
}  // namespace optcast::e2e
