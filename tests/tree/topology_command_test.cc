// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// `optcast topology`: host lists in the three formats, the trees it plans (roots spread over the
// racks, every rack's leaves in tree order), the warning for roots that share a rack, and the
// command itself at 1024 hosts, checked by reading its file back as the servers would.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "config/root_placement.h"
#include "config/topology.h"
#include "server_process.h"
#include "tools/topology/host_racks.h"
#include "tools/topology/tree_plan.h"

namespace optcast::tools::topology {
namespace {

std::vector<HostRack> Parse(const std::string& text, HostListFormat f = HostListFormat::kAuto,
                            const std::string& label = "rack") {
  std::vector<HostRack> out;
  const Status st = ParseHostRacks("hosts.txt", text, f, label, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

std::string ParseError(const std::string& text, HostListFormat f = HostListFormat::kAuto) {
  std::vector<HostRack> out;
  const Status st = ParseHostRacks("hosts.txt", text, f, "rack", &out);
  EXPECT_FALSE(st.ok());
  return st.message();
}

TEST(HostRacks, ReadsTextLinesWithServerHostsAndComments) {
  const auto h = Parse("# host rack\ngpu01 r1\n\ngpu02 r1  # second\ncpu01 r1 server\ngpu03 r2\n");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].host, "gpu01");
  EXPECT_EQ(h[0].rack, "r1");
  EXPECT_EQ(h[1].line, 4);
  EXPECT_TRUE(h[2].server_only);
  EXPECT_FALSE(h[3].server_only);
  EXPECT_EQ(h[3].rack, "r2");
}

TEST(HostRacks, ReadsSlurmTopologyPaths) {
  const auto h = Parse("core.leaf03.node017\ncore.leaf04.node018\nleaf05.node019\n");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].host, "node017");
  EXPECT_EQ(h[0].rack, "leaf03");
  EXPECT_EQ(h[2].rack, "leaf05");
}

TEST(HostRacks, ReadsKubernetesNodesByLabel) {
  const std::string json = R"({"kind": "List", "items": [
    {"metadata": {"name": "n1", "labels": {"rack": "a", "kubernetes.io/os": "linux"}}},
    {"metadata": {"name": "n2", "labels": {"rack": "b"}}}]})";
  const auto h = Parse(json);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].host, "n2");
  EXPECT_EQ(h[1].rack, "b");
  std::vector<HostRack> out;
  const Status st = ParseHostRacks("nodes.json", json, HostListFormat::kKubernetes, "example.com/rack", &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("node 'n1' has no label 'example.com/rack'"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("--rack-label"), std::string::npos) << st.ToString();
}

TEST(HostRacks, RefusesBadLinesAndDuplicatesNamingTheLine) {
  EXPECT_NE(ParseError("a r1\nb r1 x y\n").find("hosts.txt:2: expected `host rack`"), std::string::npos);
  EXPECT_NE(ParseError("a r1\na r2\n").find("host 'a' is listed twice"), std::string::npos);
  EXPECT_NE(ParseError("node017\n", HostListFormat::kSlurm).find("SLURM_TOPOLOGY_ADDR"), std::string::npos);
  EXPECT_NE(ParseError("# nothing\n").find("no hosts"), std::string::npos);
  EXPECT_NE(ParseError("{\"items\": 3}").find("kubectl get nodes"), std::string::npos);
}

// 1024 hosts in 32 racks of 32, as the study's fabric.
std::vector<HostRack> Cluster1024() {
  std::vector<HostRack> hosts;
  for (int i = 0; i < 1024; ++i) {
    char host[16], rack[16];
    std::snprintf(host, sizeof(host), "gpu%04d", i);
    std::snprintf(rack, sizeof(rack), "r%02d", i / 32);
    hosts.push_back(HostRack{host, rack, false, i + 1});
  }
  return hosts;
}

TEST(TreePlan, SpreadsTheRootsOfA1024HostJobOverItsRacks) {
  TreePlan plan;
  ASSERT_TRUE(MakeTreePlan(Cluster1024(), TreePlanOptions{32, 8918, {}}, &plan).ok());
  EXPECT_EQ(plan.racks.size(), 32u);
  EXPECT_EQ(plan.workers.size(), 1024u);
  EXPECT_EQ(plan.servers.size(), 32u * 32 + 32);
  EXPECT_EQ(plan.roots, 32);
  EXPECT_EQ(plan.root_racks, 32);
  std::map<std::string, const PlannedServer*> by_name;
  std::set<std::string> addresses, root_racks;
  for (const PlannedServer& s : plan.servers) {
    by_name[s.name] = &s;
    EXPECT_TRUE(addresses.insert(s.host + ":" + std::to_string(s.port)).second) << s.name << " shares an address";
    if (s.parent.empty()) {
      EXPECT_TRUE(root_racks.insert(s.rack).second) << s.name << " shares rack " << s.rack;
    }
  }
  EXPECT_EQ(root_racks.size(), 32u);
  // Worker i lists its rack's leaves, tree j's leaf j-th; leaf j's parent is root j.
  for (int i = 0; i < 1024; i += 97) {
    const WorkerServers& w = plan.workers[i];
    ASSERT_EQ(w.servers.size(), 32u);
    for (int j = 0; j < 32; ++j) {
      const PlannedServer* leaf =
          by_name.at("leaf-r" + std::string(i / 32 < 10 ? "0" : "") + std::to_string(i / 32) + "-" + std::to_string(j));
      EXPECT_EQ(w.servers[j], leaf->host + ":" + std::to_string(leaf->port));
      EXPECT_EQ(leaf->parent, "root-" + std::to_string(j));
      EXPECT_EQ(leaf->rack, plan.racks[i / 32]);
    }
  }
}

TEST(TreePlan, PutsServersOnServerHostsAndRootsOffTheLeafHosts) {
  TreePlan plan;
  const auto hosts = Parse("g1 a\ng2 a\nc1 a server\nc2 a server\nc3 a server\ng3 b\nc4 b server\n");
  ASSERT_TRUE(MakeTreePlan(hosts, TreePlanOptions{2, 9000, {}}, &plan).ok());
  std::map<std::string, std::string> where;
  for (const PlannedServer& s : plan.servers) where[s.name] = s.host + ":" + std::to_string(s.port);
  EXPECT_EQ(where["leaf-a-0"], "c1:9000");
  EXPECT_EQ(where["leaf-a-1"], "c2:9000");
  EXPECT_EQ(where["root-0"], "c3:9000");  // rack a's third server host: no leaf there
  EXPECT_EQ(where["leaf-b-0"], "c4:9000");
  EXPECT_EQ(where["leaf-b-1"], "c4:9001");
  EXPECT_EQ(where["root-1"], "c4:9002");  // rack b has one server host: it takes everything
  ASSERT_EQ(plan.workers.size(), 3u);
  EXPECT_EQ(plan.workers[2].servers, (std::vector<std::string>{"c4:9000", "c4:9001"}));
  ASSERT_TRUE(MakeTreePlan(hosts, TreePlanOptions{2, 9000, {"sp1"}}, &plan).ok());
  for (const PlannedServer& s : plan.servers) {
    if (s.parent.empty()) {
      EXPECT_EQ(s.rack, config::kSpineRack);
      EXPECT_EQ(s.host, "sp1");
    }
  }
}

TEST(TreePlan, OneRackGetsFlatServersAndBadOptionsAreRefused) {
  TreePlan plan;
  ASSERT_TRUE(MakeTreePlan(Parse("g1 a\ng2 a\n"), TreePlanOptions{2, 8918, {}}, &plan).ok());
  EXPECT_EQ(plan.roots, 0);
  for (const PlannedServer& s : plan.servers) EXPECT_TRUE(s.parent.empty()) << s.name;
  EXPECT_FALSE(MakeTreePlan(Parse("g1 a\n"), TreePlanOptions{0, 8918, {}}, &plan).ok());
  const Status st = MakeTreePlan(Parse("c1 a server\n"), TreePlanOptions{}, &plan);
  EXPECT_NE(st.message().find("run ranks"), std::string::npos) << st.ToString();
}

class TempFiles : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::string path = Temp();
    std::ofstream(path) << text;
    return path;
  }
  std::string Temp() {
    char name[] = "/tmp/optcast-topology-XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
    paths_.push_back(name);
    return name;
  }
  void TearDown() override {
    for (const auto& p : paths_) std::remove(p.c_str());
  }
  std::vector<std::string> paths_;
};

using RootPlacement = TempFiles;

TEST_F(RootPlacement, WarnsWhenRootsShareARackButNotOnTheSpine) {
  const std::string shared = Write(R"(servers:
  - {name: root-0, address: 'c1:1', rack: a}
  - {name: root-1, address: 'c1:2', rack: a}
  - {name: leaf-a-0, address: 'g1:1', rack: a, parent: root-0}
  - {name: leaf-a-1, address: 'g1:2', rack: a, parent: root-1}
  - {name: leaf-b-0, address: 'g2:1', rack: b, parent: root-0}
  - {name: leaf-b-1, address: 'g2:2', rack: b, parent: root-1}
)");
  config::Topology t;
  ASSERT_TRUE(config::ReadTopology(shared, &t).ok());
  const auto w = config::RootPlacementWarnings(t);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("roots root-0, root-1 all sit in rack 'a'"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("rack: spine"), std::string::npos) << w[0];
  for (const char* fix : {"rack: b", "rack: spine"}) {
    std::ifstream in(shared);
    std::stringstream s;
    s << in.rdbuf();
    std::string text = s.str();
    text.replace(text.find("rack: a}"), 8, std::string(fix) + "}");  // root-0 moves
    std::string spread = Write(text);
    ASSERT_TRUE(config::ReadTopology(spread, &t).ok());
    EXPECT_TRUE(config::RootPlacementWarnings(t).empty()) << fix;
  }
}

using TopologyCommand = TempFiles;

// Runs `optcast topology ARGS`; returns its exit code, stdout in *out and stderr in *err.
int RunTopology(const std::string& args, std::string* out, std::string* err, const std::string& err_path) {
  const std::string cmd = daemon::OptcastBinary() + " topology " + args + " 2>" + err_path;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  out->clear();
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out->append(buf, n);
  const int rc = pclose(p);
  std::ifstream e(err_path);
  std::stringstream s;
  s << e.rdbuf();
  *err = s.str();
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST_F(TopologyCommand, Writes1024HostsFromSlurmPathsAndPrintsEveryWorkersServers) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  std::string slurm;
  for (const HostRack& h : Cluster1024()) slurm += "core." + h.rack + "." + h.host + "\n";
  const std::string hosts = Write(slurm), yaml = Temp(), err_path = Temp();
  std::string out, err;
  ASSERT_EQ(RunTopology(hosts + " -o " + yaml + " --leaves-per-rack 32", &out, &err, err_path), 0) << err;
  EXPECT_NE(err.find("1056 servers for 1024 workers in 32 racks"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning"), std::string::npos) << err;
  config::Topology t;
  const Status st = config::ReadTopology(yaml, &t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(t.servers.size(), 1056u);
  std::set<std::string> root_racks;
  for (const auto& s : t.servers) {
    if (s.parent.empty()) {
      EXPECT_EQ(t.Children(s.name).size(), 32u) << s.name;
      root_racks.insert(s.rack);
    } else {
      EXPECT_EQ(t.Depth(s.name), 1) << s.name;
    }
  }
  EXPECT_EQ(root_racks.size(), 32u);
  // One line per worker; gpu0100 (rack r03) lists rack r03's 32 leaves, the file's addresses.
  std::istringstream lines(out);
  std::string line, gpu0100;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    if (line.rfind("gpu0100 ", 0) == 0) gpu0100 = line;
  }
  EXPECT_EQ(count, 1024);
  std::string expect = "gpu0100 OPTCAST_SERVERS=";
  for (int j = 0; j < 32; ++j) {
    const auto* leaf = t.Find("leaf-r03-" + std::to_string(j));
    ASSERT_NE(leaf, nullptr);
    EXPECT_EQ(leaf->parent, "root-" + std::to_string(j));
    expect += (j ? "," : "") + leaf->address.host + ":" + std::to_string(leaf->address.port);
  }
  EXPECT_EQ(gpu0100, expect);
}

TEST_F(TopologyCommand, RefusesABadHostListNamingTheLine) {
  if (daemon::OptcastBinary().empty()) GTEST_SKIP() << "OPTCAST_BIN is not set";
  const std::string hosts = Write("gpu1 r1\ngpu2\n"), err_path = Temp();
  std::string out, err;
  EXPECT_EQ(RunTopology(hosts + " -o " + Temp(), &out, &err, err_path), 2);
  EXPECT_NE(err.find(hosts + ":2: expected `host rack`"), std::string::npos) << err;
  EXPECT_EQ(RunTopology("/nonexistent/hosts -o " + Temp(), &out, &err, err_path), 2);
  EXPECT_NE(err.find("cannot read the host list /nonexistent/hosts"), std::string::npos) << err;
}

}  // namespace
}  // namespace optcast::tools::topology
