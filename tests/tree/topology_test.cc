// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The topology file: a valid tree is read with its parents and depths; a bad one is refused with
// the file, the line and the reason.

#include "config/topology.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace optcast::config {
namespace {

class TopologyFile : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    char name[] = "/tmp/optcast-topology-XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
    std::ofstream(name) << text;
    paths_.push_back(name);
    return name;
  }
  void TearDown() override {
    for (const auto& p : paths_) std::remove(p.c_str());
  }
  std::vector<std::string> paths_;
};

TEST_F(TopologyFile, ReadsADepth3Tree) {
  const std::string path = Write(R"(servers:
  - name: spine
    address: 127.0.0.1:9000
  - name: pod-1
    address: 127.0.0.1:9001
    pod: pod-1
    parent: spine
  - name: rack-a
    address: 127.0.0.1:9002
    pod: pod-1
    rack: a
    parent: pod-1
  - name: rack-b
    address: 127.0.0.1
    rack: b
    parent: pod-1
)");
  Topology t;
  const Status st = ReadTopology(path, &t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(t.servers.size(), 4u);
  EXPECT_EQ(t.Depth("spine"), 0);
  EXPECT_EQ(t.Depth("pod-1"), 1);
  EXPECT_EQ(t.Depth("rack-a"), 2);
  EXPECT_EQ(t.Find("rack-a")->parent, "pod-1");
  EXPECT_EQ(t.Find("rack-a")->rack, "a");
  EXPECT_EQ(t.Find("rack-a")->address.port, 9002);
  EXPECT_EQ(t.Find("rack-b")->address.port, 8918);  // the default port
  EXPECT_EQ(t.Children("pod-1"), (std::vector<std::string>{"rack-a", "rack-b"}));
}

void ExpectRefused(const std::string& path, const std::string& needle) {
  Topology t;
  const Status st = ReadTopology(path, &t);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find(path), std::string::npos) << "the error names the file: " << st.ToString();
}

TEST_F(TopologyFile, RefusesUnknownParent) {
  ExpectRefused(Write("servers:\n  - name: a\n    address: h:1\n    parent: b\n"), "names parent 'b'");
}

TEST_F(TopologyFile, RefusesACycle) {
  ExpectRefused(Write("servers:\n  - {name: a, address: 'h:1', parent: b}\n  - {name: b, address: 'h:2', parent: a}\n"),
                "cycle");
}

TEST_F(TopologyFile, RefusesDuplicateNamesMissingAddressesAndUnknownKeys) {
  ExpectRefused(Write("servers:\n  - {name: a, address: 'h:1'}\n  - {name: a, address: 'h:2'}\n"), "listed twice");
  ExpectRefused(Write("servers:\n  - {name: a}\n"), "has no address");
  ExpectRefused(Write("servers:\n  - {name: a, address: 'h:1', prent: b}\n"), "unknown key 'prent'");
  ExpectRefused(Write("hosts: []\n"), "servers");
}

}  // namespace
}  // namespace optcast::config
