// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// What NCCL's loader sees, plus the plugin's pure helpers (linked from optcast_nccl).

#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nccl/collnet.h"
#include "nccl/forward.h"
#include "nccl/interfaces.h"
#include "plugin_harness.h"

namespace optcast::nccl::test {
namespace {

TEST(PluginAbi, ExportsEveryVersion) {
  for (int v = 6; v <= 12; ++v) {
    const std::string net = "ncclNetPlugin_v" + std::to_string(v);
    const std::string coll = "ncclCollNetPlugin_v" + std::to_string(v);
    auto* n = Table<ncclNet_v6_t>(net.c_str());  // every version starts with name, init
    auto* c = Table<ncclCollNet_v6_t>(coll.c_str());
    ASSERT_NE(n, nullptr) << net;
    ASSERT_NE(c, nullptr) << coll;
    EXPECT_STREQ(n->name, "Optcast");
    EXPECT_STREQ(c->name, "Optcast");
    EXPECT_NE(n->init, nullptr);
    EXPECT_NE(c->init, nullptr);
  }
  EXPECT_EQ(Table<void>("ncclNetPlugin_v5"), nullptr);
  EXPECT_EQ(Table<void>("ncclNetPlugin_v13"), nullptr);
}

TEST(PluginAbi, TablesAreComplete) {
  // NCCL calls these without checking for null.
  auto* n11 = Table<ncclNet_v11_t>("ncclNetPlugin_v11");
  for (auto fn : {reinterpret_cast<void*>(n11->devices), reinterpret_cast<void*>(n11->getProperties),
                  reinterpret_cast<void*>(n11->listen), reinterpret_cast<void*>(n11->connect),
                  reinterpret_cast<void*>(n11->accept), reinterpret_cast<void*>(n11->regMr),
                  reinterpret_cast<void*>(n11->regMrDmaBuf), reinterpret_cast<void*>(n11->deregMr),
                  reinterpret_cast<void*>(n11->isend), reinterpret_cast<void*>(n11->irecv),
                  reinterpret_cast<void*>(n11->iflush), reinterpret_cast<void*>(n11->test),
                  reinterpret_cast<void*>(n11->closeSend), reinterpret_cast<void*>(n11->closeRecv),
                  reinterpret_cast<void*>(n11->closeListen), reinterpret_cast<void*>(n11->finalize)}) {
    EXPECT_NE(fn, nullptr);
  }
  auto* c11 = Table<ncclCollNet_v11_t>("ncclCollNetPlugin_v11");
  for (auto fn : {reinterpret_cast<void*>(c11->devices), reinterpret_cast<void*>(c11->getProperties),
                  reinterpret_cast<void*>(c11->listen), reinterpret_cast<void*>(c11->connect),
                  reinterpret_cast<void*>(c11->reduceSupport), reinterpret_cast<void*>(c11->regMr),
                  reinterpret_cast<void*>(c11->deregMr), reinterpret_cast<void*>(c11->iallreduce),
                  reinterpret_cast<void*>(c11->iallgather), reinterpret_cast<void*>(c11->ireducescatter),
                  reinterpret_cast<void*>(c11->iflush), reinterpret_cast<void*>(c11->test),
                  reinterpret_cast<void*>(c11->closeColl), reinterpret_cast<void*>(c11->closeListen),
                  reinterpret_cast<void*>(c11->finalize)}) {
    EXPECT_NE(fn, nullptr);
  }
  auto* c8 = Table<ncclCollNet_v8_t>("ncclCollNetPlugin_v8");
  EXPECT_NE(c8->iallgather, nullptr);
  EXPECT_NE(c8->ireducescatter, nullptr);
}

TEST(PluginAbi, InterfaceFilterFollowsNcclRules) {
  auto prefix = InterfaceFilter::Parse("eth,ib");
  EXPECT_TRUE(prefix.Matches("eth0"));
  EXPECT_TRUE(prefix.Matches("ib1"));
  EXPECT_FALSE(prefix.Matches("lo"));
  auto exclude = InterfaceFilter::Parse("^docker,lo");
  EXPECT_TRUE(exclude.Matches("eth0"));
  EXPECT_FALSE(exclude.Matches("docker0"));
  EXPECT_FALSE(exclude.Matches("lo"));
  auto exact = InterfaceFilter::Parse("=eth0");
  EXPECT_TRUE(exact.Matches("eth0"));
  EXPECT_FALSE(exact.Matches("eth01"));
  auto exclude_exact = InterfaceFilter::Parse("^=eth0");
  EXPECT_FALSE(exclude_exact.Matches("eth0"));
  EXPECT_TRUE(exclude_exact.Matches("eth01"));
  EXPECT_TRUE(InterfaceFilter::Parse("eth0:5000").Matches("eth0"));
}

TEST(PluginAbi, InterfaceSelection) {
  std::vector<NetInterface> all(3);
  all[0].name = "lo";
  all[0].loopback = true;
  all[1].name = "docker0";
  all[2].name = "eth3";
  unsetenv("OPTCAST_SOCKET_IFNAME");
  unsetenv("NCCL_SOCKET_IFNAME");
  std::string how;
  auto chosen = SelectInterfaces(all, &how);
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(chosen[0].name, "eth3");
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  chosen = SelectInterfaces(all, &how);
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(chosen[0].name, "lo");
  setenv("OPTCAST_SOCKET_IFNAME", "^lo", 1);  // ours wins over NCCL's
  chosen = SelectInterfaces(all, &how);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_NE(how.find("OPTCAST_SOCKET_IFNAME"), std::string::npos);
  unsetenv("OPTCAST_SOCKET_IFNAME");
  unsetenv("NCCL_SOCKET_IFNAME");
  chosen = SelectInterfaces({all[0]}, &how);
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(chosen[0].name, "lo") << "loopback when nothing else is up";
  for (const auto& i : ListInterfaces()) {
    EXPECT_FALSE(i.name.empty());
    EXPECT_GT(i.speed_mbps, 0);
    EXPECT_FALSE(i.address.empty());
  }
}

TEST(PluginAbi, JobIdIsAHashOfTheWholeHandleArray) {
  std::array<std::array<uint8_t, kNetHandleMaxSize>, 3> h{};
  for (int r = 0; r < 3; ++r) h[r].fill(static_cast<uint8_t>(r + 1));
  const void* ptrs[3] = {h[0].data(), h[1].data(), h[2].data()};
  const JobId a = collnet::JobIdFromHandles(ptrs, 3);
  EXPECT_EQ(a, collnet::JobIdFromHandles(ptrs, 3));  // same on every rank
  EXPECT_NE(a, collnet::JobIdFromHandles(ptrs, 2));  // nranks matters
  h[2][127] ^= 1;                                    // so does every byte of every handle
  EXPECT_NE(a, collnet::JobIdFromHandles(ptrs, 3));
  const void* swapped[3] = {h[1].data(), h[0].data(), h[2].data()};
  EXPECT_NE(collnet::JobIdFromHandles(ptrs, 3), collnet::JobIdFromHandles(swapped, 3));  // and rank order
  // The two halves come from different hashes.
  EXPECT_NE(0, std::memcmp(a.bytes.data(), a.bytes.data() + 8, 8));
}

TEST(PluginAbi, TypeAndOperatorMapping) {
  DataType dt;
  RedOp op;
  ASSERT_TRUE(collnet::ToOptcastType(ncclFloat32, &dt));
  EXPECT_EQ(dt, DataType::kFloat32);
  ASSERT_TRUE(collnet::ToOptcastType(ncclBfloat16, &dt));
  EXPECT_EQ(dt, DataType::kBFloat16);
  ASSERT_TRUE(collnet::ToOptcastType(ncclFloat16, &dt));
  EXPECT_EQ(dt, DataType::kFloat16);
  ASSERT_TRUE(collnet::ToOptcastType(ncclUint64, &dt));
  EXPECT_EQ(dt, DataType::kUInt64);
  EXPECT_FALSE(collnet::ToOptcastType(ncclFloat8e4m3, &dt));
  EXPECT_FALSE(collnet::ToOptcastType(ncclFloat8e5m2, &dt));
  ASSERT_TRUE(collnet::ToOptcastOp(ncclMax, &op));
  EXPECT_EQ(op, RedOp::kMax);
  ASSERT_TRUE(collnet::ToOptcastOp(ncclMin, &op));
  EXPECT_EQ(op, RedOp::kMin);
  EXPECT_FALSE(collnet::ToOptcastOp(ncclAvg, &op));
  EXPECT_FALSE(collnet::ToOptcastOp(5, &op));
}

TEST(PluginAbi, NetPluginLibraryNames) {
  EXPECT_EQ(NetPluginLibraryName("ofi"), "libnccl-net-ofi.so");
  EXPECT_EQ(NetPluginLibraryName("libnccl-net-ofi.so"), "libnccl-net-ofi.so");
  EXPECT_EQ(NetPluginLibraryName("/opt/x/libfoo.so.1"), "/opt/x/libfoo.so.1");
}

}  // namespace
}  // namespace optcast::nccl::test
