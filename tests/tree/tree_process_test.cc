// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Aggregation trees of real `optcast server` processes: one built from a topology file, and one
// whose inner server is SIGKILLed mid-collective, and two trees one of whose leaves is SIGKILLed
// with failover off (with it on: tree_failover_test.cc).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "config/topology.h"
#include "harness.h"
#include "optcast/communicator.h"
#include "optcast/job_id.h"
#include "server_process.h"
#include "tree_reference.h"

namespace optcast::tree {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A loopback port nobody listens on right now (the server binds it a moment later).
uint16_t FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// Runs one allreduce of a new job, rank r on server rank_server[r], each checked against the
// reference. `first` >= 0: that rank says hello before any other starts.
std::vector<Status> RunRanks(const std::vector<std::string>& rank_server, DataType dt, RedOp op, size_t count,
                             uint64_t seed, const TreeShape& shape, int first = -1) {
  const JobId job = JobId::Random();
  const int n = static_cast<int>(rank_server.size());
  std::vector<Status> st(n);
  std::vector<std::unique_ptr<Communicator>> comms(n);
  e2e::CommConfig c;
  c.chunk_bytes = 8192;
  if (first >= 0) {
    st[first] = e2e::MakeComm({rank_server[first]}, job, n, first, c, &comms[first]);
    if (!st[first].ok()) return st;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      if (!comms[r]) st[r] = e2e::MakeComm({rank_server[r]}, job, n, r, c, &comms[r]);
      if (!st[r].ok()) return;
      const size_t es = DataTypeSize(dt);
      std::vector<uint8_t> in(count * es), got(count * es);
      e2e::FillInput(dt, op, seed, r, 0, count, in.data());
      st[r] = comms[r]->AllReduce(in.data(), got.data(), count, dt, op);
      if (st[r].ok()) {
        const std::string err = VerifyTree(shape, got.data(), dt, op, seed, count);
        if (!err.empty()) st[r] = InternalError(err);
      }
    });
  }
  for (auto& t : threads) t.join();
  return st;
}

// `optcast server --topology FILE --name NAME` processes for a topology file written here:
// server i is names[i] under parents[i] ("" for the root) on a free loopback port. The file is
// removed with this object.
struct TopologyServers {
  std::string path;
  std::vector<uint16_t> ports;
  std::vector<std::unique_ptr<daemon::ServerProcess>> servers;

  ~TopologyServers() {
    if (!path.empty()) std::remove(path.c_str());
  }

  Status Start(const std::vector<std::string>& names, const std::vector<std::string>& parents,
               const std::vector<std::string>& flags) {
    std::string yaml = "servers:\n";
    for (size_t i = 0; i < names.size(); ++i) {
      ports.push_back(FreePort());
      if (ports.back() == 0) return InternalError("no free loopback port");
      yaml += "  - name: " + names[i] + "\n    address: 127.0.0.1:" + std::to_string(ports.back()) + "\n";
      if (!parents[i].empty()) yaml += "    parent: " + parents[i] + "\n";
    }
    char tmpl[] = "/tmp/optcast-tree-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) return InternalError("mkstemp failed");
    close(fd);
    path = tmpl;
    std::ofstream(path) << yaml;
    for (const std::string& name : names) {
      std::vector<std::string> args{"--topology", path, "--name", name};
      args.insert(args.end(), flags.begin(), flags.end());
      servers.push_back(std::make_unique<daemon::ServerProcess>());
      if (Status st = servers.back()->Start(args); !st.ok()) return Status(st.code(), name + ": " + st.message());
    }
    return Status::Ok();
  }

  std::vector<std::string> RankServers(const TreeShape& shape) const {
    std::vector<std::string> out;
    for (int node : shape.rank_node) out.push_back(servers[node]->address());
    return out;
  }
};

TEST(TreeProcess, TopologyFileDepth3) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  const std::vector<std::string> names{"spine", "pod-1", "rack-a", "rack-b"};
  TopologyServers topo;
  const Status started = topo.Start(names, {"", "spine", "pod-1", "pod-1"}, {"--reduce-threads", "0"});
  ASSERT_TRUE(started.ok()) << started.ToString();
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(topo.servers[i]->port(), topo.ports[i]) << names[i] << " listens on its entry's port";
  }
  // Nodes: 0 spine, 1 pod-1, 2 rack-a, 3 rack-b; rank 4 talks to the spine itself.
  const TreeShape shape{{-1, 0, 1, 1}, {2, 3, 2, 3, 0}};
  for (DataType dt : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt32}) {
    const auto st = RunRanks(topo.RankServers(shape), dt, RedOp::kAvg, 5000, 900 + static_cast<int>(dt), shape);
    for (size_t r = 0; r < st.size(); ++r)
      EXPECT_TRUE(st[r].ok()) << DataTypeName(dt) << " rank " << r << ": " << st[r].ToString();
  }
}

// A port that is free on every one of `hosts` (loopback addresses), and the next `more` ports too.
// Probed with SO_REUSEADDR, as the server binds: a port held only by connections in TIME_WAIT
// (many, on a machine busy with other loopback traffic) is free for it.
uint16_t FreePortOn(const std::vector<std::string>& hosts, int more) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const uint16_t base = FreePort();
    bool ok = base != 0 && base + more < 65535;
    for (const std::string& h : hosts) {
      for (int i = 0; ok && i <= more; ++i) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(base + i));
        ok = inet_pton(AF_INET, h.c_str(), &a.sin_addr) == 1 &&
             bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
        close(fd);
      }
    }
    if (ok) return base;
  }
  return 0;
}

// A tree written by `optcast topology`: two racks of two hosts, two leaves per rack, so two
// trees whose roots sit in different racks. Each rank uses the OPTCAST_SERVERS the command printed
// for its host (its rack's two leaves: two stripes, one per tree); every server is an
// `optcast server --topology FILE --name NAME` process listening on its entry's address.
TEST(TreeProcess, TwoTreesFromOptcastTopologyWithRootsInDifferentRacks) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  const std::vector<std::string> hosts{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"};
  const uint16_t port = FreePortOn(hosts, 1);
  ASSERT_NE(port, 0);
  char list[] = "/tmp/optcast-hosts-XXXXXX", yaml[] = "/tmp/optcast-tree-XXXXXX";
  close(mkstemp(list));
  close(mkstemp(yaml));
  std::ofstream(list) << "127.0.0.1 ra\n127.0.0.2 ra\n127.0.0.3 rb\n127.0.0.4 rb\n";
  const std::string cmd = daemon::OptcastBinary() + " topology " + list + " -o " + yaml +
                          " --leaves-per-rack 2 --port " + std::to_string(port) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t got; (got = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, got);
  ASSERT_EQ(pclose(p), 0) << out;
  std::map<std::string, std::vector<std::string>> servers_of;  // host -> OPTCAST_SERVERS
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t eq = line.find(" OPTCAST_SERVERS=");
    if (eq == std::string::npos) continue;
    std::istringstream list_in(line.substr(eq + 17));
    for (std::string s; std::getline(list_in, s, ',');) servers_of[line.substr(0, eq)].push_back(s);
  }
  ASSERT_EQ(servers_of.size(), 4u) << out;
  config::Topology topo;
  ASSERT_TRUE(config::ReadTopology(yaml, &topo).ok());
  ASSERT_EQ(topo.servers.size(), 6u);
  std::vector<std::unique_ptr<daemon::ServerProcess>> procs;
  std::set<std::string> root_racks;
  for (const auto& s : topo.servers) {
    if (s.parent.empty()) root_racks.insert(s.rack);
    procs.push_back(std::make_unique<daemon::ServerProcess>());
    const std::string at = s.address.host + ":" + std::to_string(s.address.port);
    const Status st =
        procs.back()->Start({"--topology", yaml, "--name", s.name, "--listen", at, "--reduce-threads", "0"});
    ASSERT_TRUE(st.ok()) << s.name << ": " << st.ToString();
  }
  EXPECT_EQ(root_racks, (std::set<std::string>{"ra", "rb"}));
  // Ranks 0, 1 in rack ra and 2, 3 in rb; both trees have this shape: root, then one leaf per rack.
  const TreeShape shape{{-1, 0, 0}, {1, 1, 2, 2}};
  const size_t count = 20000;
  for (DataType dt : {DataType::kFloat32, DataType::kInt32}) {
    const JobId job = JobId::Random();
    std::vector<Status> st(4);
    std::vector<std::thread> threads;
    for (int r = 0; r < 4; ++r) {
      threads.emplace_back([&, r] {
        e2e::CommConfig c;
        c.chunk_bytes = 8192;
        std::unique_ptr<Communicator> comm;
        st[r] = e2e::MakeComm(servers_of.at(hosts[r]), job, 4, r, c, &comm);
        if (!st[r].ok()) return;
        std::vector<uint8_t> in(count * DataTypeSize(dt)), got(in.size());
        e2e::FillInput(dt, RedOp::kSum, 31, r, 0, count, in.data());
        st[r] = comm->AllReduce(in.data(), got.data(), count, dt, RedOp::kSum);
        if (st[r].ok()) {
          const std::string err = VerifyTree(shape, got.data(), dt, RedOp::kSum, 31, count);
          if (!err.empty()) st[r] = InternalError(err);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 4; ++r)
      EXPECT_TRUE(st[r].ok()) << DataTypeName(dt) << " rank " << r << ": " << st[r].ToString();
  }
  std::remove(list);
  std::remove(yaml);
}

// A root named by --topology takes a job wider than its --max-fan-in from the first hello on,
// even when that hello is from one of its own ranks and no child server has joined yet.
TEST(TreeProcess, TopologyRootTakesAWideJobWhoseOwnRankSaysHelloFirst) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  TopologyServers topo;
  const Status started =
      topo.Start({"spine", "rack-a", "rack-b"}, {"", "spine", "spine"}, {"--reduce-threads", "0", "--max-fan-in", "3"});
  ASSERT_TRUE(started.ok()) << started.ToString();
  // Nodes: 0 spine, 1 rack-a, 2 rack-b. Five ranks, more than a server may combine (3); rank 4
  // talks to the spine and says hello before anyone else.
  const TreeShape shape{{-1, 0, 0}, {1, 2, 1, 2, 0}};
  const auto st = RunRanks(topo.RankServers(shape), DataType::kFloat32, RedOp::kSum, 5000, 77, shape, /*first=*/4);
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

// Bad tree flags stop the server at start with the reason.
TEST(TreeProcess, BadTreeFlagsAreRefused) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  char path[] = "/tmp/optcast-tree-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "servers:\n  - {name: spine, address: '127.0.0.1:9001'}\n  - {name: rack-a, address: "
                         "'127.0.0.1:9002', parent: spine}\n";
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const Case cases[] = {
      {{"--upstream", "127.0.0.1:9", "--topology", path, "--name", "spine"}, "give one"},
      {{"--topology", path, "--name", "rack-z"}, "no server named 'rack-z'; pass --name with one of: spine, rack-a"},
      {{"--topology", path}, "no server named '(none given)'"},
      {{"--name", "spine"}, "give the file"},
  };
  for (const Case& c : cases) {
    daemon::ServerProcess p;
    const Status st = p.Start(c.args, {}, milliseconds(10000));
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st.ToString();
  }
  std::remove(path);
}

// A root whose topology file puts another root in its rack starts, and names both and the fix.
TEST(TreeProcess, ARootWarnsOfRootsSharingItsRack) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  char path[] = "/tmp/optcast-tree-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  const uint16_t port = FreePort();
  std::ofstream(path) << "servers:\n  - {name: root-0, address: '127.0.0.1:" << port
                      << "', rack: a}\n  - {name: root-1, address: '127.0.0.1:9', rack: a}\n"
                         "  - {name: leaf-a, address: '127.0.0.1:9', rack: a, parent: root-0}\n"
                         "  - {name: leaf-b, address: '127.0.0.1:9', rack: b, parent: root-1}\n";
  daemon::ServerProcess p;
  const Status st = p.Start({"--topology", path, "--name", "root-0"});
  ASSERT_TRUE(st.ok()) << st.ToString();
  const std::string out = p.Output();
  EXPECT_NE(out.find("roots root-0, root-1 all sit in rack 'a'"), std::string::npos) << out;
  EXPECT_NE(out.find("rack: spine"), std::string::npos) << out;
  std::remove(path);
}

TEST(TreeProcess, InnerServerSigkilledMidCollective) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  const std::string timeout_ms = "8000";
  // root <- inner <- {leaf-a, leaf-b}; rank 4 talks to the root.
  daemon::ServerProcess root, inner, leaf_a, leaf_b;
  ASSERT_TRUE(root.Start({"--listen", "127.0.0.1:0", "--timeout-ms", timeout_ms}).ok());
  ASSERT_TRUE(inner.Start({"--listen", "127.0.0.1:0", "--timeout-ms", timeout_ms, "--upstream", root.address()}).ok());
  ASSERT_TRUE(
      leaf_a.Start({"--listen", "127.0.0.1:0", "--timeout-ms", timeout_ms, "--upstream", inner.address()}).ok());
  ASSERT_TRUE(
      leaf_b.Start({"--listen", "127.0.0.1:0", "--timeout-ms", timeout_ms, "--upstream", inner.address()}).ok());
  const std::vector<std::string> rank_server = {leaf_a.address(), leaf_b.address(), leaf_a.address(), leaf_b.address(),
                                                root.address()};
  const int n = static_cast<int>(rank_server.size());
  const JobId job = JobId::Random();
  std::atomic<int> done{0};
  std::vector<Status> st(n);
  std::vector<Clock::time_point> failed_at(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      e2e::CommConfig c;
      c.chunk_bytes = 8192;
      c.timeout = milliseconds(30000);
      std::unique_ptr<Communicator> comm;
      st[r] = e2e::MakeComm({rank_server[r]}, job, n, r, c, &comm);
      const size_t count = 1 << 18;
      std::vector<float> in(count, 1.0f), got(count);
      for (int i = 0; st[r].ok() && i < 100000; ++i) {
        st[r] = comm->AllReduce(in.data(), got.data(), count, DataType::kFloat32, RedOp::kSum);
        if (st[r].ok() && got[0] != static_cast<float>(n)) st[r] = InternalError("wrong sum");
        if (r == 0) done.store(i + 1);
      }
      failed_at[r] = Clock::now();
    });
  }
  const bool started = e2e::WaitFor([&] { return done.load() >= 3; }, milliseconds(30000));
  const auto killed_at = Clock::now();
  inner.Signal(SIGKILL);
  for (auto& t : threads) t.join();
  ASSERT_TRUE(started) << "the tree never completed 3 collectives: " << st[0].ToString();
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(st[r].ok()) << "rank " << r;
    const auto waited = std::chrono::duration_cast<milliseconds>(failed_at[r] - killed_at).count();
    EXPECT_LT(waited, 8000) << "rank " << r << " learned of the failure after " << waited
                            << " ms: " << st[r].ToString();
  }
  // The leaves name what happened to their parent.
  EXPECT_NE(st[0].message().find("upstream server"), std::string::npos) << st[0].ToString();
}

// What a tree job with failover off does when a leaf dies (tree_failover_test.cc has it with
// failover on). Two trees (two leaves per rack, as `optcast topology --leaves-per-rack 2` lays
// them out): leaf 1 of rack a dies mid-collective. Ranks 0 and 1 lose it, and the rest of tree 1
// fails the job for ranks 2 and 3, so every rank of the job, in both racks, ends with an error
// within the bound instead of a hang or a wrong result.
TEST(TreeProcess, ALeafSigkilledWithFailoverOffFailsEveryRankOfTheJobWithAClearError) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  const std::string timeout_ms = "8000";
  daemon::ServerProcess root0, root1, a0, a1, b0, b1;
  ASSERT_TRUE(root0.Start({"--listen", "127.0.0.1:0", "--timeout-ms", timeout_ms}).ok());
  ASSERT_TRUE(root1.Start({"--listen", "127.0.0.1:0", "--timeout-ms", timeout_ms}).ok());
  for (auto [leaf, root] : {std::pair{&a0, &root0}, {&b0, &root0}, {&a1, &root1}, {&b1, &root1}}) {
    ASSERT_TRUE(
        leaf->Start({"--listen", "127.0.0.1:0", "--timeout-ms", timeout_ms, "--upstream", root->address()}).ok());
  }
  // Ranks 0, 1 in rack a, 2, 3 in rack b; each lists its rack's leaves in tree order.
  const std::vector<std::vector<std::string>> rank_servers = {{a0.address(), a1.address()},
                                                              {a0.address(), a1.address()},
                                                              {b0.address(), b1.address()},
                                                              {b0.address(), b1.address()}};
  const int n = static_cast<int>(rank_servers.size());
  const JobId job = JobId::Random();
  std::atomic<int> done{0};
  std::vector<Status> st(n);
  std::vector<Clock::time_point> failed_at(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      e2e::CommConfig c;
      c.chunk_bytes = 8192;
      c.timeout = milliseconds(30000);
      c.failover = false;
      std::unique_ptr<Communicator> comm;
      st[r] = e2e::MakeComm(rank_servers[r], job, n, r, c, &comm);
      const size_t count = 1 << 17;
      std::vector<float> in(count, 1.0f), got(count);
      for (int i = 0; st[r].ok() && i < 100000; ++i) {
        st[r] = comm->AllReduce(in.data(), got.data(), count, DataType::kFloat32, RedOp::kSum);
        if (st[r].ok() && (got[0] != static_cast<float>(n) || got[count - 1] != static_cast<float>(n))) {
          st[r] = InternalError("wrong sum");
        }
        if (r == 0) done.store(i + 1);
      }
      failed_at[r] = Clock::now();
    });
  }
  const bool started = e2e::WaitFor([&] { return done.load() >= 3; }, milliseconds(30000));
  const auto killed_at = Clock::now();
  a1.Signal(SIGKILL);
  for (auto& t : threads) t.join();
  ASSERT_TRUE(started) << "the trees never completed 3 collectives: " << st[0].ToString();
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(st[r].ok()) << "rank " << r;
    EXPECT_EQ(st[r].message().find("wrong sum"), std::string::npos) << "rank " << r << ": " << st[r].ToString();
    const auto waited = std::chrono::duration_cast<milliseconds>(failed_at[r] - killed_at).count();
    EXPECT_LT(waited, 8000) << "rank " << r << " learned of the failure after " << waited
                            << " ms: " << st[r].ToString();
    // Rack a's ranks name the leaf they lost; rack b's, their leaf 1, which passes on root 1's
    // error (its downstream server disconnected).
    EXPECT_NE(st[r].message().find("server 127.0.0.1:"), std::string::npos) << "rank " << r << ": " << st[r].ToString();
  }
}

}  // namespace
}  // namespace optcast::tree
