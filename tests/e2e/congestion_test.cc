// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The TCP congestion control of the server path's connections (transport/posix/congestion.h):
// CUBIC by default whatever the host's default, a configured name on both ends, the host's own
// with "system", and a clear error for a name the host does not offer. Checked on the real
// sockets: every descriptor of this process that is a TCP connection to or from a test server.

#include "transport/posix/congestion.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "checks.h"
#include "harness.h"

namespace optcast::e2e {
namespace {

std::string HostDefault() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  std::getline(in, name);
  return name;
}

bool HostOffers(const std::string& name) { return transport::posix::CheckCongestionControl(name).ok(); }

// The congestion control of every connected TCP socket of this process with one end on one of
// `ports`, keyed "local->peer".
std::map<std::string, std::string> ConnectionsTo(const std::vector<uint16_t>& ports) {
  std::map<std::string, std::string> out;
  ForEachConnectionTo(ports, [&](int fd, const std::string& key) {
    const std::string cc = transport::posix::CongestionControlOf(fd);
    if (!cc.empty()) out[key] = cc;
  });
  return out;
}

// Runs a 2-rank allreduce over `farm`'s servers with `cc` on the ranks, checks its result, and
// returns the congestion control of every connection between the ranks and the servers while
// the communicators are still open.
std::map<std::string, std::string> RunAndInspect(ServerFarm& farm, const std::string& cc) {
  constexpr int kRanks = 2;
  constexpr size_t kCount = 100003;
  const JobId job = JobId::Random();
  CommConfig cfg;
  cfg.tcp_congestion = cc;
  std::vector<std::unique_ptr<Communicator>> comms(kRanks);
  std::vector<Status> status(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      Status st = MakeComm(farm.addresses(), job, kRanks, r, cfg, &comms[r]);
      if (st.ok()) {
        std::vector<float> in(kCount), got(kCount);
        FillInput(DataType::kFloat32, RedOp::kSum, 77, r, 0, kCount, in.data());
        st = comms[r]->AllReduce(in.data(), got.data(), kCount, DataType::kFloat32, RedOp::kSum);
        if (st.ok()) {
          const std::string err = VerifyReduction(got.data(), DataType::kFloat32, RedOp::kSum, 77, kRanks, 0, kCount);
          if (!err.empty()) st = InternalError(err);
        }
      }
      status[r] = st;
    });
  }
  for (auto& t : ranks) t.join();
  ExpectAllOk(status);
  std::vector<uint16_t> ports;
  for (int i = 0; i < farm.size(); ++i) ports.push_back(farm.port(i));
  auto conns = ConnectionsTo(ports);
  comms.clear();
  return conns;
}

class TcpCongestion : public ::testing::Test {
 protected:
  void SetUp() override {
    if (OverFabric()) GTEST_SKIP() << "congestion control is a property of the tcp transport's sockets";
  }
};

// Runs a job over `nservers` servers with `setting` on the servers and the ranks, and expects
// every connection between them, seen from both ends, to use `expected`.
void ExpectEveryConnectionUses(int nservers, const std::string& setting, const std::string& expected) {
  server::ServerOptions so = TestServerOptions();
  so.transport.tcp.congestion = setting;
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(nservers, so).ok());
  const auto conns = RunAndInspect(farm, setting);
  // 2 ranks x nservers, each connection seen from both of its ends.
  ASSERT_EQ(conns.size(), 4u * static_cast<size_t>(nservers));
  for (const auto& [where, cc] : conns) EXPECT_EQ(cc, expected) << where << " (host default " << HostDefault() << ")";
}

TEST_F(TcpCongestion, DataConnectionsUseCubicWhateverTheHostDefault) {
  if (!HostOffers("cubic")) GTEST_SKIP() << "this host does not offer cubic";
  ExpectEveryConnectionUses(2, "", "cubic");
}

TEST_F(TcpCongestion, ANamedControlIsUsedAtBothEnds) {
  if (!HostOffers("reno")) GTEST_SKIP() << "this host does not offer reno";
  ExpectEveryConnectionUses(2, "reno", "reno");
}

TEST_F(TcpCongestion, SystemKeepsTheHostDefault) { ExpectEveryConnectionUses(1, "system", HostDefault()); }

TEST_F(TcpCongestion, AControlTheHostDoesNotOfferIsAClearError) {
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(1).ok());
  CommConfig cfg;
  cfg.tcp_congestion = "no_such_cc";
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(farm.addresses(), JobId::Random(), 1, 0, cfg, &comm);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'no_such_cc' is not available on this host (available: "), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("'system'"), std::string::npos) << st.ToString();

  server::ServerOptions so = TestServerOptions();
  so.transport.tcp.congestion = "no_such_cc";
  ServerFarm refused;
  st = refused.Start(1, so);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'no_such_cc' is not available"), std::string::npos) << st.ToString();

  setenv("OPTCAST_TCP_CONGESTION", "no_such_cc", 1);
  CommunicatorOptions o;
  st = ApplyEnvironment(&o);
  unsetenv("OPTCAST_TCP_CONGESTION");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("OPTCAST_TCP_CONGESTION: TCP congestion control 'no_such_cc'"), std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace optcast::e2e
