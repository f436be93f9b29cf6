// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The CollNet side of the plugin against real reduction servers on threads of this process.
// Ranks are threads, each with its own collComm, as NCCL's proxy threads of several processes
// would use them: listen, exchange handles, connect, then collectives polled with test().

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "nccl/device_properties.h"
#include "plugin_harness.h"
#include "reduce/half.h"
#include "transport/fabric_info.h"
#include "transport/kind.h"

namespace optcast::nccl::test {
namespace {

ncclCollNet_v11_t* CollV11() { return Table<ncclCollNet_v11_t>("ncclCollNetPlugin_v11"); }

// Runs fn(rank) on `n` threads and joins them.
void OnRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// Servers for the whole suite; OPTCAST_SERVERS points at them.
class CollNet : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    servers_ = new LocalServers(2);
    setenv("OPTCAST_SERVERS", servers_->addresses().c_str(), 1);
  }
  static void TearDownTestSuite() {
    unsetenv("OPTCAST_SERVERS");
    delete servers_;
    servers_ = nullptr;
  }
  static LocalServers* servers_;
};
LocalServers* CollNet::servers_ = nullptr;

// One collnet communicator of `n` ranks over the v11 table.
struct Group {
  ncclCollNet_v11_t* cn = CollV11();
  std::vector<void*> ctx, coll;

  explicit Group(int n) : ctx(n), coll(n) {
    std::vector<std::array<char, kNetHandleMaxSize>> handles(n);
    std::vector<void*> listen(n);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(cn->init(&ctx[r], 0xc0ffee, TestLogger), ncclSuccess);
      EXPECT_EQ(cn->listen(ctx[r], 0, handles[r].data(), &listen[r]), ncclSuccess);
    }
    // What NCCL's all-gather of the handles delivers: the same array on every rank.
    std::vector<void*> ptrs(n);
    for (int r = 0; r < n; ++r) ptrs[r] = handles[r].data();
    OnRanks(n, [&](int r) {
      EXPECT_EQ(cn->connect(ptrs.data(), n, r, listen[r], &coll[r]), ncclSuccess);
      EXPECT_NE(coll[r], nullptr);
      EXPECT_EQ(cn->closeListen(listen[r]), ncclSuccess);
    });
  }
  ~Group() {
    for (size_t r = 0; r < coll.size(); ++r) {
      if (coll[r] != nullptr) {
        EXPECT_EQ(cn->closeColl(coll[r]), ncclSuccess);
      }
      EXPECT_EQ(cn->finalize(ctx[r]), ncclSuccess);
    }
  }
  int size() const { return static_cast<int>(coll.size()); }
};

void WaitColl(ncclCollNet_v11_t* cn, void* request, int expect_bytes = -1) {
  int done = 0, size = -1;
  ncclResult_t rc = ncclSuccess;
  ASSERT_NE(request, nullptr);
  ASSERT_TRUE(PollUntil([&] {
    rc = cn->test(request, &done, &size);
    return rc != ncclSuccess || done != 0;
  }));
  ASSERT_EQ(rc, ncclSuccess);
  if (expect_bytes >= 0) {
    EXPECT_EQ(size, expect_bytes);
  }
}

// ---- typed values: small integers, exact in every type, so results compare bit for bit ----

size_t ElemSize(ncclDataType_t dt) {
  switch (dt) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

void Encode(ncclDataType_t dt, double v, uint8_t* out) {
  switch (dt) {
    case ncclInt8: *reinterpret_cast<int8_t*>(out) = static_cast<int8_t>(v); break;
    case ncclUint8: *out = static_cast<uint8_t>(v); break;
    case ncclInt32: *reinterpret_cast<int32_t*>(out) = static_cast<int32_t>(v); break;
    case ncclUint32: *reinterpret_cast<uint32_t*>(out) = static_cast<uint32_t>(v); break;
    case ncclInt64: *reinterpret_cast<int64_t*>(out) = static_cast<int64_t>(v); break;
    case ncclUint64: *reinterpret_cast<uint64_t*>(out) = static_cast<uint64_t>(v); break;
    case ncclFloat16: *reinterpret_cast<uint16_t*>(out) = reduce::FloatToHalf(static_cast<float>(v)); break;
    case ncclBfloat16: *reinterpret_cast<uint16_t*>(out) = reduce::FloatToBFloat16(static_cast<float>(v)); break;
    case ncclFloat32: *reinterpret_cast<float*>(out) = static_cast<float>(v); break;
    case ncclFloat64: *reinterpret_cast<double*>(out) = v; break;
    default: break;
  }
}

bool IsUnsigned(ncclDataType_t dt) { return dt == ncclUint8 || dt == ncclUint32 || dt == ncclUint64; }

double Value(ncclDataType_t dt, ncclRedOp_t op, int rank, size_t i) {
  if (op == ncclProd) {
    const int k = static_cast<int>((rank * 5 + i * 3) % 7);
    return k == 0 ? 2.0 : (k == 1 && !IsUnsigned(dt) ? -1.0 : 1.0);
  }
  const double v = static_cast<double>((rank * 7 + i * 13) % 17) - 8.0;  // -8..8
  return IsUnsigned(dt) ? v + 8.0 : v;
}

double Combine(ncclRedOp_t op, double a, double b) {
  switch (op) {
    case ncclSum: return a + b;
    case ncclProd: return a * b;
    case ncclMax: return std::max(a, b);
    default: return std::min(a, b);
  }
}

std::vector<uint8_t> Input(ncclDataType_t dt, ncclRedOp_t op, int rank, size_t count) {
  const size_t es = ElemSize(dt);
  std::vector<uint8_t> v(count * es);
  for (size_t i = 0; i < count; ++i) Encode(dt, Value(dt, op, rank, i), v.data() + i * es);
  return v;
}

std::vector<uint8_t> Expected(ncclDataType_t dt, ncclRedOp_t op, int nranks, size_t count) {
  const size_t es = ElemSize(dt);
  std::vector<uint8_t> v(count * es);
  for (size_t i = 0; i < count; ++i) {
    double acc = Value(dt, op, 0, i);
    for (int r = 1; r < nranks; ++r) acc = Combine(op, acc, Value(dt, op, r, i));
    Encode(dt, acc, v.data() + i * es);
  }
  return v;
}

struct ReduceCase {
  const char* name;
  ncclDataType_t dt;
  ncclRedOp_t op;
};

// Every rank reduces `count` elements as `pieces` iallreduce calls in flight at once (NCCL's
// steps), tests them oldest first, and compares with the reference bit for bit.
void AllReduceOnGroup(Group& g, const ReduceCase& c, size_t count, int pieces) {
  const size_t es = ElemSize(c.dt);
  const auto expected = Expected(c.dt, c.op, g.size(), count);
  OnRanks(g.size(), [&](int r) {
    const auto in = Input(c.dt, c.op, r, count);
    std::vector<uint8_t> out(count * es, 0xab);
    void *smh = nullptr, *rmh = nullptr;
    ASSERT_EQ(g.cn->regMr(g.coll[r], const_cast<uint8_t*>(in.data()), in.size(), kPtrHost, &smh), ncclSuccess);
    ASSERT_EQ(g.cn->regMr(g.coll[r], out.data(), out.size(), kPtrHost, &rmh), ncclSuccess);
    std::vector<void*> reqs;
    std::vector<int> bytes;
    size_t at = 0;
    for (int p = 0; p < pieces; ++p) {
      const size_t n = p == pieces - 1 ? count - at : count / pieces;
      void* req = nullptr;
      ASSERT_EQ(g.cn->iallreduce(g.coll[r], const_cast<uint8_t*>(in.data()) + at * es, out.data() + at * es, n, c.dt,
                                 c.op, smh, rmh, &req),
                ncclSuccess);
      reqs.push_back(req);
      bytes.push_back(static_cast<int>(n * es));
      at += n;
    }
    for (size_t i = 0; i < reqs.size(); ++i) WaitColl(g.cn, reqs[i], bytes[i]);
    EXPECT_TRUE(out == expected) << c.name << " rank " << r;
    EXPECT_EQ(g.cn->deregMr(g.coll[r], smh), ncclSuccess);
    EXPECT_EQ(g.cn->deregMr(g.coll[r], rmh), ncclSuccess);
  });
}

// The fabric's device wins where libfabric knows it; the interface fills in what it does not.
TEST(CollNetDevice, FabricValuesWinWhereKnownAndTheInterfaceFillsIn) {
  NetInterface itf;
  itf.name = "eth0";
  itf.pci_path = "/sys/devices/pci0000:00/0000:00:03.0";
  itf.speed_mbps = 25000;
  DeviceProperties plain = DescribeDevice(itf, std::nullopt, true);
  EXPECT_EQ(plain.name, "eth0");
  EXPECT_EQ(plain.pci_path, itf.pci_path);
  EXPECT_EQ(plain.speed_mbps, 25000);
  EXPECT_EQ(plain.ptr_support, kPtrHost);

  transport::FabricDeviceInfo efa;
  efa.provider = "efa";
  efa.name = "rdmap16s27";
  efa.pci_path = "/sys/bus/pci/devices/0000:10:1b.0";
  efa.speed_mbps = 100000;
  efa.hmem = true;
  DeviceProperties e = DescribeDevice(itf, efa, /*data_path_takes_device_memory=*/true);
  EXPECT_EQ(e.name, "rdmap16s27");
  EXPECT_EQ(e.pci_path, "/sys/bus/pci/devices/0000:10:1b.0");
  EXPECT_EQ(e.speed_mbps, 100000);
  EXPECT_EQ(e.ptr_support, kPtrHost | kPtrCuda);
  // FI_HMEM alone is not enough: the plugin's own data path must take GPU memory too.
  EXPECT_EQ(DescribeDevice(itf, efa, /*data_path_takes_device_memory=*/false).ptr_support, kPtrHost);

  // tcp;ofi_rxm on loopback: a name, no PCI device, no speed, no device memory.
  itf.name = "lo";
  itf.pci_path.clear();
  itf.speed_mbps = 10000;
  transport::FabricDeviceInfo tcp;
  tcp.provider = "tcp;ofi_rxm";
  tcp.name = "lo";
  DeviceProperties t = DescribeDevice(itf, tcp, true);
  EXPECT_EQ(t.name, "lo");
  EXPECT_EQ(t.pci_path, "");
  EXPECT_EQ(t.speed_mbps, 10000);
  EXPECT_EQ(t.ptr_support, kPtrHost);
}

TEST_F(CollNet, DevicesPropertiesAndReduceSupport) {
  auto* cn = CollV11();
  void* ctx = nullptr;
  ASSERT_EQ(cn->init(&ctx, 7, TestLogger), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(cn->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 1);
  ncclNetProperties_v11_t p{};
  ASSERT_EQ(cn->getProperties(0, &p), ncclSuccess);
  ASSERT_NE(p.name, nullptr);
  EXPECT_GT(std::strlen(p.name), 0u);
  transport::Kind kind = transport::Kind::kTcp;
  ASSERT_TRUE(transport::KindFromEnvironment(transport::Kind::kTcp, &kind).ok());
  const NetInterface& itf = Devices().at(0);
  if (kind == transport::Kind::kOfi) {
    // The fabric device as libfabric itself describes it, the interface's values where it is silent.
    transport::FabricDeviceInfo dev;
    ASSERT_TRUE(transport::ProbeFabricDevice(transport::RequestedFabricProvider(), itf.address, &dev).ok());
    EXPECT_STREQ(p.name, dev.name.c_str());
    const std::string pci = dev.pci_path.empty() ? itf.pci_path : dev.pci_path;
    EXPECT_EQ(p.pciPath == nullptr ? std::string() : std::string(p.pciPath), pci);
    EXPECT_EQ(p.speed, dev.speed_mbps > 0 ? dev.speed_mbps : itf.speed_mbps);
    EXPECT_EQ(p.ptrSupport, dev.hmem && kDataPathTakesDeviceMemory ? (kPtrHost | kPtrCuda) : kPtrHost)
        << "provider " << dev.provider;
  } else {
    EXPECT_STREQ(p.name, itf.name.c_str());
    EXPECT_EQ(p.ptrSupport, kPtrHost);
  }
  // Over libfabric a registration lives in its communicator's domains.
  EXPECT_EQ(p.regIsGlobal, kind == transport::Kind::kOfi ? 0 : 1);
  EXPECT_GT(p.maxCollBytes, 0u);
  EXPECT_LE(p.maxCollBytes, kMaxNetSizeBytes);
  EXPECT_GT(p.speed, 0);
  // Same NIC as net device 0, so that NCCL merges them into one topology node.
  auto* net = Table<ncclNet_v11_t>("ncclNetPlugin_v11");
  void* nctx = nullptr;
  ncclNetCommConfig_v11_t config{-1};
  ASSERT_EQ(net->init(&nctx, 7, &config, TestLogger, nullptr), ncclSuccess);
  ncclNetProperties_v11_t np{};
  ASSERT_EQ(net->getProperties(0, &np), ncclSuccess);
  EXPECT_STREQ(p.name, np.name);
  EXPECT_EQ(p.pciPath == nullptr, np.pciPath == nullptr);
  if (p.pciPath != nullptr && np.pciPath != nullptr) {
    EXPECT_STREQ(p.pciPath, np.pciPath);
  }
  EXPECT_EQ(p.speed, np.speed);
  EXPECT_EQ(p.ptrSupport, np.ptrSupport);
  EXPECT_EQ(p.guid, np.guid);
  EXPECT_NE(cn->getProperties(1, &p), ncclSuccess);

  for (int dt = 0; dt <= 11; ++dt) {
    for (int op = 0; op <= 5; ++op) {
      int supported = -1;
      ASSERT_EQ(cn->reduceSupport(static_cast<ncclDataType_t>(dt), static_cast<ncclRedOp_t>(op), &supported),
                ncclSuccess);
      const bool expect = dt <= ncclBfloat16 && op <= ncclMin;  // fp8, avg and custom ops are not offloaded
      EXPECT_EQ(supported, expect ? 1 : 0) << "dtype " << dt << " op " << op;
    }
  }
  EXPECT_EQ(cn->finalize(ctx), ncclSuccess);
  EXPECT_EQ(net->finalize(nctx), ncclSuccess);
  EXPECT_TRUE(Logged("CollNet available"));
}

TEST_F(CollNet, AllReduceTypesAndOperators) {
  Group g(4);
  for (const ReduceCase& c :
       {ReduceCase{"float32 sum", ncclFloat32, ncclSum}, ReduceCase{"bfloat16 sum", ncclBfloat16, ncclSum},
        ReduceCase{"float16 sum", ncclFloat16, ncclSum}, ReduceCase{"int32 max", ncclInt32, ncclMax},
        ReduceCase{"int64 min", ncclInt64, ncclMin}, ReduceCase{"float64 prod", ncclFloat64, ncclProd},
        ReduceCase{"uint8 min", ncclUint8, ncclMin}, ReduceCase{"uint32 sum", ncclUint32, ncclSum}}) {
    SCOPED_TRACE(c.name);
    AllReduceOnGroup(g, c, 100003, 1);
  }
  EXPECT_TRUE(Logged("CollNet active: rank 3 of 4"));
}

TEST_F(CollNet, AllReduceManyInFlightAndOddSizes) {
  Group g(3);
  AllReduceOnGroup(g, {"float32 sum", ncclFloat32, ncclSum}, (1u << 20) + 5, 8);  // 8 steps in flight
  AllReduceOnGroup(g, {"bfloat16 sum", ncclBfloat16, ncclSum}, 1, 1);
  AllReduceOnGroup(g, {"int32 max", ncclInt32, ncclMax}, 17, 4);
  AllReduceOnGroup(g, {"float16 sum", ncclFloat16, ncclSum}, 0, 1);  // empty collective
}

// OPTCAST_TRACE reaches the plugin: NCCL's requests appear as request spans in the trace, valid
// JSON as soon as the communicators close. (The plugin's tracer stays on for the rest of this
// process; ctest runs each test in a process of its own.)
TEST_F(CollNet, TraceFromEnvironmentRecordsEveryRequest) {
  const std::string path = "/tmp/optcast-plugin-trace-" + std::to_string(::getpid()) + ".json";
  setenv("OPTCAST_TRACE", "/tmp/optcast-plugin-trace-%p.json", 1);
  {
    Group g(2);
    AllReduceOnGroup(g, {"float32 sum", ncclFloat32, ncclSum}, 100003, 4);  // 4 requests in flight per rank
  }
  unsetenv("OPTCAST_TRACE");
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path << " was not written";
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json t = nlohmann::json::parse(text.str());
  std::map<std::string, int> open;
  int begins = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["name"] != "allreduce") continue;
    if (e["ph"] == "b") {
      ++begins;
      ++open[e["id"].get<std::string>()];
      EXPECT_EQ(e["args"]["dtype"], "float32");
    } else if (e["ph"] == "e") {
      --open[e["id"].get<std::string>()];
    }
  }
  EXPECT_EQ(begins, 2 * 4);
  for (const auto& [id, n] : open) EXPECT_EQ(n, 0) << "request " << id << " has no end";
  std::remove(path.c_str());
}

TEST_F(CollNet, IndependentCommunicatorsInOneProcess) {
  // Two communicators at once, each with its own job: if they shared one, the servers would
  // refuse the duplicate ranks or mix the data.
  Group a(2);
  Group b(2);
  std::thread ta([&] { AllReduceOnGroup(a, {"float32 sum", ncclFloat32, ncclSum}, 300000, 4); });
  std::thread tb([&] { AllReduceOnGroup(b, {"int32 max", ncclInt32, ncclMax}, 200000, 4); });
  ta.join();
  tb.join();
}

// Bytes of rank r's all-gather contribution.
std::vector<uint8_t> Part(int r, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(r * 31 + i * 7 + 1);
  return v;
}

TEST_F(CollNet, AllGatherWholeBufferAndWindows) {
  constexpr int kRanks = 3;
  constexpr size_t kPart = 10007;  // odd, so windows cross part boundaries anywhere
  const size_t all = kRanks * kPart;
  std::vector<uint8_t> expected;
  for (int r = 0; r < kRanks; ++r) {
    const auto p = Part(r, kPart);
    expected.insert(expected.end(), p.begin(), p.end());
  }
  Group g(kRanks);
  // window size 0 = the whole buffer in one call (a true Optcast all-gather).
  for (size_t window : {size_t{0}, size_t{4093}, size_t{10007}, size_t{25000}}) {
    SCOPED_TRACE("window " + std::to_string(window));
    OnRanks(kRanks, [&](int r) {
      const auto mine = Part(r, kPart);
      std::vector<uint8_t> out(all, 0xcc);
      const size_t step = window == 0 ? all : window;
      std::vector<void*> reqs;
      int k = 0;
      for (size_t w = 0; w < all; w += step, ++k) {
        const size_t wbytes = std::min(step, all - w);
        // This rank's bytes of the window, from their first byte (what NCCL passes as sendData).
        const size_t own_begin = std::max(w, static_cast<size_t>(r) * kPart);
        const uint8_t* send = mine.data() + std::min(own_begin - static_cast<size_t>(r) * kPart, kPart);
        // Every other window arrives as two SGE parts.
        std::vector<ncclNetSGE_v11_t> parts;
        if (k % 2 == 1 && wbytes > 1) {
          parts.push_back({nullptr, out.data() + w, wbytes / 2});
          parts.push_back({nullptr, out.data() + w + wbytes / 2, wbytes - wbytes / 2});
        } else {
          parts.push_back({nullptr, out.data() + w, wbytes});
        }
        void* req = nullptr;
        ASSERT_EQ(g.cn->iallgather(g.coll[r], const_cast<uint8_t*>(send), static_cast<int>(parts.size()), parts.data(),
                                   kPart, w, wbytes, nullptr, &req),
                  ncclSuccess);
        reqs.push_back(req);
        if (reqs.size() == 8) {
          WaitColl(g.cn, reqs.front());
          reqs.erase(reqs.begin());
        }
      }
      for (void* req : reqs) WaitColl(g.cn, req);
      EXPECT_TRUE(out == expected) << "rank " << r;
    });
  }
}

// A rank that is still busy with the previous collective when the others start an all-gather
// must not receive their data for a collective it has not issued yet (that fails its
// communicator: "answered collective #N, which is not in flight").
TEST_F(CollNet, AllGatherWhileOneRankIsStillBusy) {
  constexpr int kRanks = 3;
  constexpr size_t kPart = 4099;
  Group g(kRanks);
  std::vector<uint8_t> expected;
  for (int r = 0; r < kRanks; ++r) {
    const auto p = Part(r, kPart);
    expected.insert(expected.end(), p.begin(), p.end());
  }
  OnRanks(kRanks, [&](int r) {
    std::vector<float> x(1000, 1.0f);
    void* req = nullptr;
    ASSERT_EQ(g.cn->iallreduce(g.coll[r], x.data(), x.data(), x.size(), ncclFloat32, ncclSum, nullptr, nullptr, &req),
              ncclSuccess);
    // The last rank lets the others finish the all-reduce and start the all-gather before it
    // polls again.
    if (r == kRanks - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    WaitColl(g.cn, req);
    const auto mine = Part(r, kPart);
    std::vector<uint8_t> out(kRanks * kPart, 0xcc);
    ncclNetSGE_v11_t part{nullptr, out.data(), out.size()};
    ASSERT_EQ(
        g.cn->iallgather(g.coll[r], const_cast<uint8_t*>(mine.data()), 1, &part, kPart, 0, out.size(), nullptr, &req),
        ncclSuccess);
    WaitColl(g.cn, req, static_cast<int>(out.size()));
    EXPECT_TRUE(out == expected) << "rank " << r;
  });
}

TEST_F(CollNet, ReduceScatterWholeBufferAndWindows) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 2503;  // elements per rank
  constexpr size_t kPart = kCount * 4;
  const size_t all = kRanks * kPart;
  const auto full = Expected(ncclFloat32, ncclSum, kRanks, kRanks * kCount);
  Group g(kRanks);
  for (size_t window : {size_t{0}, size_t{4 * 1021}, size_t{kPart}, size_t{4 * 6000}}) {
    SCOPED_TRACE("window " + std::to_string(window));
    OnRanks(kRanks, [&](int r) {
      const auto in = Input(ncclFloat32, ncclSum, r, kRanks * kCount);
      std::vector<uint8_t> out(kPart, 0xcc);
      const size_t step = window == 0 ? all : window;
      std::vector<void*> reqs;
      int k = 0;
      for (size_t w = 0; w < all; w += step, ++k) {
        const size_t wbytes = std::min(step, all - w);
        std::vector<ncclNetSGE_v11_t> parts;
        uint8_t* src = const_cast<uint8_t*>(in.data()) + w;
        if (k % 2 == 1) {
          const size_t half = (wbytes / 8) * 4;  // keep elements whole
          parts.push_back({nullptr, src, half});
          parts.push_back({nullptr, src + half, wbytes - half});
        } else {
          parts.push_back({nullptr, src, wbytes});
        }
        // Where this rank's share of the window lands (NCCL passes its first byte).
        const size_t own_begin = std::max(w, static_cast<size_t>(r) * kPart);
        uint8_t* recv = out.data() + std::min(own_begin - static_cast<size_t>(r) * kPart, kPart);
        void* req = nullptr;
        ASSERT_EQ(g.cn->ireducescatter(g.coll[r], static_cast<int>(parts.size()), parts.data(), recv, kPart, w, wbytes,
                                       ncclFloat32, ncclSum, nullptr, &req),
                  ncclSuccess);
        reqs.push_back(req);
      }
      for (void* req : reqs) WaitColl(g.cn, req);
      EXPECT_EQ(0, std::memcmp(out.data(), full.data() + r * kPart, kPart)) << "rank " << r;
    });
  }
}

TEST_F(CollNet, WindowOutsideTheBufferIsRefused) {
  Group g(2);
  std::vector<uint8_t> buf(64);
  ncclNetSGE_v11_t part{nullptr, buf.data(), 64};
  void* req = nullptr;
  // 2 ranks x 16 bytes = 32 bytes, but the window claims 64.
  EXPECT_EQ(g.cn->iallgather(g.coll[0], buf.data(), 1, &part, 16, 0, 64, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(g.cn->iallreduce(g.coll[0], buf.data(), buf.data(), 4, ncclFloat8e4m3, ncclSum, nullptr, nullptr, &req),
            ncclInvalidArgument);
}

// The v6 table: init(logger), int counts, v6 properties.
TEST_F(CollNet, Version6Adapter) {
  auto* cn = Table<ncclCollNet_v6_t>("ncclCollNetPlugin_v6");
  ASSERT_NE(cn, nullptr);
  ASSERT_EQ(cn->init(TestLogger), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(cn->devices(&ndev), ncclSuccess);
  ASSERT_EQ(ndev, 1);
  ncclNetProperties_v6_t p{};
  ASSERT_EQ(cn->getProperties(0, &p), ncclSuccess);
  EXPECT_GT(std::strlen(p.name), 0u);
  constexpr int kRanks = 2;
  std::array<std::array<char, kNetHandleMaxSize>, kRanks> handles{};
  void* listen[kRanks];
  void* coll[kRanks] = {};
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(cn->listen(0, handles[r].data(), &listen[r]), ncclSuccess);
  void* ptrs[kRanks] = {handles[0].data(), handles[1].data()};
  OnRanks(kRanks, [&](int r) { EXPECT_EQ(cn->connect(ptrs, kRanks, r, listen[r], &coll[r]), ncclSuccess); });
  constexpr int kCount = 5000;
  const auto expected = Expected(ncclFloat32, ncclSum, kRanks, kCount);
  OnRanks(kRanks, [&](int r) {
    auto in = Input(ncclFloat32, ncclSum, r, kCount);
    std::vector<uint8_t> out(in.size());
    void* mh = nullptr;
    ASSERT_EQ(cn->regMr(coll[r], out.data(), static_cast<int>(out.size()), kPtrHost, &mh), ncclSuccess);
    void* req = nullptr;
    ASSERT_EQ(cn->iallreduce(coll[r], in.data(), out.data(), kCount, ncclFloat32, ncclSum, nullptr, mh, &req),
              ncclSuccess);
    int done = 0, size = 0;
    ASSERT_TRUE(PollUntil([&] {
      EXPECT_EQ(cn->test(req, &done, &size), ncclSuccess);
      return done != 0;
    }));
    EXPECT_EQ(size, kCount * 4);
    EXPECT_TRUE(out == expected);
    void* flush = reinterpret_cast<void*>(1);
    EXPECT_EQ(cn->iflush(coll[r], out.data(), static_cast<int>(out.size()), mh, &flush), ncclSuccess);
    EXPECT_EQ(flush, nullptr);
    EXPECT_EQ(cn->deregMr(coll[r], mh), ncclSuccess);
  });
  std::vector<uint8_t> buf(4096);
  void* mh = nullptr;
  EXPECT_EQ(cn->regMr(nullptr, buf.data(), static_cast<int>(buf.size()), kPtrHost, &mh), ncclInvalidArgument);
  EXPECT_EQ(mh, nullptr);
  EXPECT_TRUE(Logged("CollNet regMr without a collComm"));
  uint64_t not_a_handle[8] = {};
  EXPECT_EQ(cn->deregMr(coll[0], not_a_handle), ncclInvalidArgument);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(cn->closeListen(listen[r]), ncclSuccess);
    EXPECT_EQ(cn->closeColl(coll[r]), ncclSuccess);
  }
}

TEST_F(CollNet, DisabledWithoutServers) {
  const std::string saved = std::getenv("OPTCAST_SERVERS");
  unsetenv("OPTCAST_SERVERS");
  auto* cn = CollV11();
  void* ctx = nullptr;
  ASSERT_EQ(cn->init(&ctx, 8, TestLogger), ncclSuccess);  // as NCCL does first: hands over the logger
  int ndev = -1;
  EXPECT_EQ(cn->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 0) << "without servers NCCL must see no CollNet device";
  char handle[kNetHandleMaxSize];
  void* listen = nullptr;
  ASSERT_EQ(cn->listen(nullptr, 0, handle, &listen), ncclSuccess);
  void* ptrs[1] = {handle};
  void* coll = nullptr;
  EXPECT_EQ(cn->connect(ptrs, 1, 0, listen, &coll), ncclInvalidUsage);
  EXPECT_EQ(coll, nullptr);
  EXPECT_TRUE(Logged("OPTCAST_SERVERS is not set; CollNet disabled"));
  EXPECT_EQ(cn->closeListen(listen), ncclSuccess);
  EXPECT_EQ(cn->finalize(ctx), ncclSuccess);
  setenv("OPTCAST_SERVERS", saved.c_str(), 1);
}

TEST_F(CollNet, UnreachableServerFailsConnectCleanly) {
  const std::string saved = std::getenv("OPTCAST_SERVERS");
  setenv("OPTCAST_SERVERS", "127.0.0.1:1", 1);
  setenv("OPTCAST_CONNECT_TIMEOUT_MS", "300", 1);
  auto* cn = CollV11();
  void* ctx = nullptr;
  ASSERT_EQ(cn->init(&ctx, 9, TestLogger), ncclSuccess);
  char handle[kNetHandleMaxSize];
  void* listen = nullptr;
  ASSERT_EQ(cn->listen(nullptr, 0, handle, &listen), ncclSuccess);
  void* ptrs[1] = {handle};
  void* coll = nullptr;
  EXPECT_NE(cn->connect(ptrs, 1, 0, listen, &coll), ncclSuccess);
  EXPECT_EQ(coll, nullptr);
  EXPECT_TRUE(Logged("CollNet NOT active"));
  EXPECT_EQ(cn->closeListen(listen), ncclSuccess);
  EXPECT_EQ(cn->finalize(ctx), ncclSuccess);
  unsetenv("OPTCAST_CONNECT_TIMEOUT_MS");
  setenv("OPTCAST_SERVERS", saved.c_str(), 1);
}

}  // namespace
}  // namespace optcast::nccl::test
