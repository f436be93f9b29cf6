// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The point-to-point network (ncclNet) of the plugin, driven the way NCCL's proxy drives it:
// non-blocking connection setup, posted receives, isend retried until it gets a request, test
// polled until done.

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "plugin_harness.h"

namespace optcast::nccl::test {
namespace {

// memcmp, but defined for empty ranges (whose data() may be null).
bool SameBytes(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 gen(seed);
  for (auto& b : v) b = static_cast<uint8_t>(gen());
  return v;
}

// A connected send/recv pair over one table version.
template <typename Net>
struct Pair {
  Net* net = nullptr;
  void* ctx = nullptr;
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

ncclNet_v11_t* NetV11() { return Table<ncclNet_v11_t>("ncclNetPlugin_v11"); }

// listen -> connect / accept, both polled from one thread: neither call may block.
void ConnectV11(Pair<ncclNet_v11_t>* p, int dev = 0) {
  p->net = NetV11();
  ncclNetCommConfig_v11_t config{-1};
  ASSERT_EQ(p->net->init(&p->ctx, 0x1234, &config, TestLogger, nullptr), ncclSuccess);
  char handle[kNetHandleMaxSize] = {};
  ASSERT_EQ(p->net->listen(p->ctx, dev, handle, &p->listen), ncclSuccess);
  ASSERT_NE(p->listen, nullptr);
  char connect_handle[kNetHandleMaxSize];
  std::memcpy(connect_handle, handle, sizeof(handle));  // what the bootstrap exchange would deliver
  ncclNetDeviceHandle_v11_t* send_dev = nullptr;
  ncclNetDeviceHandle_v11_t* recv_dev = nullptr;
  int calls = 0;
  ASSERT_TRUE(PollUntil([&] {
    ++calls;
    if (p->send == nullptr) {
      EXPECT_EQ(p->net->connect(p->ctx, dev, connect_handle, &p->send, &send_dev), ncclSuccess);
    }
    if (p->recv == nullptr) {
      EXPECT_EQ(p->net->accept(p->listen, &p->recv, &recv_dev), ncclSuccess);
    }
    return p->send != nullptr && p->recv != nullptr;
  }));
  EXPECT_GE(calls, 1);
}

void Close(Pair<ncclNet_v11_t>* p) {
  EXPECT_EQ(p->net->closeSend(p->send), ncclSuccess);
  EXPECT_EQ(p->net->closeRecv(p->recv), ncclSuccess);
  EXPECT_EQ(p->net->closeListen(p->listen), ncclSuccess);
  EXPECT_EQ(p->net->finalize(p->ctx), ncclSuccess);
}

// Tests a request until done; returns the sizes test() reported.
std::vector<int> WaitDone(ncclNet_v11_t* net, void* request, int n) {
  std::vector<int> sizes(n, -1);
  int done = 0;
  ncclResult_t rc = ncclSuccess;
  EXPECT_TRUE(PollUntil([&] {
    rc = net->test(request, &done, sizes.data());
    return rc != ncclSuccess || done != 0;
  }));
  EXPECT_EQ(rc, ncclSuccess);
  return sizes;
}

// Tests a send and its receive until both are done, as NCCL's proxy does (it never waits on one
// side alone): a message larger than the sockets' buffers completes only while the receiver
// reads. Returns the sizes each side's test() reported.
std::pair<int, int> WaitBothDone(ncclNet_v11_t* net, void* send_request, void* recv_request) {
  int send_size = -1, recv_size = -1;
  int send_done = 0, recv_done = 0;
  ncclResult_t rc = ncclSuccess;
  EXPECT_TRUE(PollUntil([&] {
    if (!send_done) rc = net->test(send_request, &send_done, &send_size);
    if (rc == ncclSuccess && !recv_done) rc = net->test(recv_request, &recv_done, &recv_size);
    return rc != ncclSuccess || (send_done != 0 && recv_done != 0);
  }));
  EXPECT_EQ(rc, ncclSuccess);
  return {send_size, recv_size};
}

void* IsendRetry(ncclNet_v11_t* net, void* comm, void* data, size_t size, int tag, void* mhandle) {
  void* request = nullptr;
  EXPECT_TRUE(PollUntil([&] {
    EXPECT_EQ(net->isend(comm, data, size, tag, mhandle, nullptr, &request), ncclSuccess);
    return request != nullptr;
  }));
  return request;
}

TEST(NcclNet, DevicesAndProperties) {
  auto* net = NetV11();
  ASSERT_NE(net, nullptr);
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config{-1};
  ASSERT_EQ(net->init(&ctx, 1, &config, TestLogger, nullptr), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(net->devices(&ndev), ncclSuccess);
  ASSERT_GT(ndev, 0);
  for (int d = 0; d < ndev; ++d) {
    ncclNetProperties_v11_t p{};
    ASSERT_EQ(net->getProperties(d, &p), ncclSuccess);
    ASSERT_NE(p.name, nullptr);
    EXPECT_GT(std::strlen(p.name), 0u);
    EXPECT_EQ(p.ptrSupport, kPtrHost);
    EXPECT_GT(p.speed, 0);
    EXPECT_EQ(p.maxRecvs, 8);
    EXPECT_GT(p.maxComms, 0);
    EXPECT_EQ(p.regIsGlobal, 1);
    EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_EQ(p.vProps.ndevs, 1);
    EXPECT_EQ(p.vProps.devs[0], d);
    EXPECT_GT(p.maxP2pBytes, 0u);
    EXPECT_LE(p.maxP2pBytes, kMaxNetSizeBytes);
    EXPECT_GT(p.maxCollBytes, 0u);
    EXPECT_LE(p.maxCollBytes, kMaxNetSizeBytes);
    EXPECT_EQ(p.maxMultiRequestSize, 1);
    if (p.pciPath != nullptr) {
      EXPECT_EQ(p.pciPath[0], '/');
    }
  }
  ncclNetProperties_v11_t p{};
  EXPECT_NE(net->getProperties(ndev, &p), ncclSuccess);

  // Older layouts describe the same device.
  auto* v6 = Table<ncclNet_v6_t>("ncclNetPlugin_v6");
  ASSERT_EQ(v6->init(TestLogger), ncclSuccess);
  ncclNetProperties_v6_t p6{};
  ASSERT_EQ(v6->getProperties(0, &p6), ncclSuccess);
  ncclNetProperties_v11_t p11{};
  ASSERT_EQ(net->getProperties(0, &p11), ncclSuccess);
  EXPECT_STREQ(p6.name, p11.name);
  EXPECT_EQ(p6.speed, p11.speed);
  EXPECT_EQ(p6.maxRecvs, 8);
  auto* v12 = Table<ncclNet_v12_t>("ncclNetPlugin_v12");
  ncclNetProperties_v12_t p12{};
  ASSERT_EQ(v12->getProperties(0, &p12), ncclSuccess);
  EXPECT_STREQ(p12.name, p11.name);
  EXPECT_EQ(p12.maxCollBytes, p11.maxCollBytes);
  EXPECT_EQ(p12.railId, -1);
  EXPECT_EQ(p12.planeId, -1);
  auto* v9 = Table<ncclNet_v9_t>("ncclNetPlugin_v9");
  ncclNetProperties_v9_t p9{};
  ASSERT_EQ(v9->getProperties(0, &p9), ncclSuccess);
  EXPECT_EQ(p9.maxP2pBytes, p11.maxP2pBytes);
  EXPECT_EQ(net->finalize(ctx), ncclSuccess);
}

TEST(NcclNet, SendReceiveSizesIncludingZero) {
  Pair<ncclNet_v11_t> p;
  ASSERT_NO_FATAL_FAILURE(ConnectV11(&p));
  auto* net = p.net;
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{65537}, size_t{1} << 20, (size_t{8} << 20) + 3}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const auto src = Pattern(size, static_cast<uint32_t>(size));
    // The receive buffer is larger than the message: test() must report the bytes that came.
    std::vector<uint8_t> dst(size + 64, 0xee);
    void* send_mh = nullptr;
    void* recv_mh = nullptr;
    ASSERT_EQ(net->regMr(p.send, const_cast<uint8_t*>(src.data()), src.size(), kPtrHost, &send_mh), ncclSuccess);
    ASSERT_EQ(net->regMr(p.recv, dst.data(), dst.size(), kPtrHost, &recv_mh), ncclSuccess);
    void* rdata = dst.data();
    size_t rsize = dst.size();
    int tag = 42;
    // NCCL may mark a receive's completion optional by storing 0x1 in *request.
    void* rreq = reinterpret_cast<void*>(kOptionalRecvCompletion);
    ASSERT_EQ(net->irecv(p.recv, 1, &rdata, &rsize, &tag, &recv_mh, nullptr, &rreq), ncclSuccess);
    ASSERT_NE(rreq, nullptr);
    void* sreq = IsendRetry(net, p.send, const_cast<uint8_t*>(src.data()), size, tag, send_mh);
    const auto [ssize, rsize_done] = WaitBothDone(net, sreq, rreq);
    EXPECT_EQ(ssize, static_cast<int>(size));
    EXPECT_EQ(rsize_done, static_cast<int>(size));
    EXPECT_TRUE(SameBytes(src.data(), dst.data(), size));
    EXPECT_EQ(dst[size], 0xee) << "wrote past the message";
    void* fl = reinterpret_cast<void*>(1);
    int isz = static_cast<int>(size);
    ASSERT_EQ(net->iflush(p.recv, 1, &rdata, &isz, &recv_mh, &fl), ncclSuccess);
    EXPECT_EQ(fl, nullptr) << "host memory needs no flush";
    EXPECT_EQ(net->deregMr(p.send, send_mh), ncclSuccess);
    EXPECT_EQ(net->deregMr(p.recv, recv_mh), ncclSuccess);
  }
  Close(&p);
}

TEST(NcclNet, GroupedReceiveMatchesByTag) {
  Pair<ncclNet_v11_t> p;
  ASSERT_NO_FATAL_FAILURE(ConnectV11(&p));
  auto* net = p.net;
  constexpr int kN = 8;
  std::vector<std::vector<uint8_t>> src(kN), dst(kN);
  void* data[kN];
  size_t sizes[kN];
  int tags[kN];
  void* mh[kN] = {};
  for (int i = 0; i < kN; ++i) {
    const size_t n = 1000 * static_cast<size_t>(i) + (i == 3 ? 0 : 13);  // one empty message
    src[i] = Pattern(n, 100 + i);
    dst[i].assign(n + 8, 0);
    data[i] = dst[i].data();
    sizes[i] = dst[i].size();
    tags[i] = 10 + i;
  }
  void* rreq = nullptr;
  ASSERT_EQ(net->irecv(p.recv, kN, data, sizes, tags, mh, nullptr, &rreq), ncclSuccess);
  ASSERT_NE(rreq, nullptr);
  // A tag outside the posted group cannot be sent yet.
  void* stray = nullptr;
  uint8_t byte = 1;
  for (int k = 0; k < 20; ++k) {
    ASSERT_EQ(net->isend(p.send, &byte, 1, 99, nullptr, nullptr, &stray), ncclSuccess);
    ASSERT_EQ(stray, nullptr);
  }
  // Send in reverse tag order: each lands in the buffer posted with its tag.
  std::vector<void*> sreqs;
  for (int i = kN - 1; i >= 0; --i) {
    sreqs.push_back(IsendRetry(net, p.send, src[i].data(), src[i].size(), tags[i], nullptr));
  }
  const auto rs = WaitDone(net, rreq, kN);
  for (void* s : sreqs) WaitDone(net, s, 1);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(rs[i], static_cast<int>(src[i].size())) << "buffer " << i;
    EXPECT_TRUE(SameBytes(src[i].data(), dst[i].data(), src[i].size())) << "buffer " << i;
  }
  Close(&p);
}

TEST(NcclNet, OversizedSendIsRefused) {
  Pair<ncclNet_v11_t> p;
  ASSERT_NO_FATAL_FAILURE(ConnectV11(&p));
  std::vector<uint8_t> small(16), big(64);
  void* data = small.data();
  size_t size = small.size();
  int tag = 1;
  void* mh = nullptr;
  void* rreq = nullptr;
  ASSERT_EQ(p.net->irecv(p.recv, 1, &data, &size, &tag, &mh, nullptr, &rreq), ncclSuccess);
  void* sreq = nullptr;
  ncclResult_t rc = ncclSuccess;
  ASSERT_TRUE(PollUntil([&] {
    rc = p.net->isend(p.send, big.data(), big.size(), tag, nullptr, nullptr, &sreq);
    return rc != ncclSuccess || sreq != nullptr;
  }));
  EXPECT_EQ(rc, ncclInvalidUsage);
  EXPECT_TRUE(Logged("receiver posted only 16 bytes"));
  Close(&p);
}

// Sender and receiver on their own threads, eight transfers in flight like NCCL_STEPS, many
// sizes; every byte checked.
TEST(NcclNet, PipelinedTransfersAcrossThreads) {
  Pair<ncclNet_v11_t> p;
  ASSERT_NO_FATAL_FAILURE(ConnectV11(&p));
  auto* net = p.net;
  constexpr int kMessages = 300;
  constexpr int kWindow = 8;
  constexpr size_t kMax = 256 * 1024;
  std::vector<size_t> sizes(kMessages);
  std::mt19937 gen(7);
  for (auto& s : sizes) s = gen() % kMax;
  std::vector<std::vector<uint8_t>> payload(kMessages);
  for (int i = 0; i < kMessages; ++i) payload[i] = Pattern(sizes[i], 1000 + i);
  std::atomic<int> failures{0};

  std::thread sender([&] {
    std::vector<void*> inflight;
    for (int i = 0; i < kMessages; ++i) {
      if (static_cast<int>(inflight.size()) == kWindow) {
        WaitDone(net, inflight.front(), 1);
        inflight.erase(inflight.begin());
      }
      void* r = IsendRetry(net, p.send, payload[i].data(), sizes[i], 7, nullptr);
      if (r == nullptr) ++failures;
      inflight.push_back(r);
    }
    for (void* r : inflight) WaitDone(net, r, 1);
  });
  std::thread receiver([&] {
    std::vector<std::vector<uint8_t>> slots(kWindow, std::vector<uint8_t>(kMax));
    std::vector<std::pair<int, void*>> inflight;
    auto finish = [&] {
      auto [i, r] = inflight.front();
      inflight.erase(inflight.begin());
      const auto got = WaitDone(net, r, 1);
      if (got[0] != static_cast<int>(sizes[i]) || !SameBytes(slots[i % kWindow].data(), payload[i].data(), sizes[i])) {
        ++failures;
      }
    };
    for (int i = 0; i < kMessages; ++i) {
      if (static_cast<int>(inflight.size()) == kWindow) finish();
      void* data = slots[i % kWindow].data();
      size_t size = kMax;
      int tag = 7;
      void* mh = nullptr;
      void* r = nullptr;
      if (net->irecv(p.recv, 1, &data, &size, &tag, &mh, nullptr, &r) != ncclSuccess || r == nullptr) ++failures;
      inflight.emplace_back(i, r);
    }
    while (!inflight.empty()) finish();
  });
  sender.join();
  receiver.join();
  EXPECT_EQ(failures.load(), 0);
  Close(&p);
}

// The v6 table: init(logger), int sizes, no device handles.
TEST(NcclNet, Version6Adapter) {
  auto* net = Table<ncclNet_v6_t>("ncclNetPlugin_v6");
  ASSERT_NE(net, nullptr);
  ASSERT_EQ(net->init(TestLogger), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(net->devices(&ndev), ncclSuccess);
  ASSERT_GT(ndev, 0);
  char handle[kNetHandleMaxSize] = {};
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listen), ncclSuccess);
  ASSERT_TRUE(PollUntil([&] {
    if (send == nullptr) {
      EXPECT_EQ(net->connect(0, handle, &send), ncclSuccess);
    }
    if (recv == nullptr) {
      EXPECT_EQ(net->accept(listen, &recv), ncclSuccess);
    }
    return send != nullptr && recv != nullptr;
  }));
  const auto src = Pattern(100000, 3);
  std::vector<uint8_t> dst(src.size());
  void* smh = nullptr;
  void* rmh = nullptr;
  ASSERT_EQ(net->regMr(send, const_cast<uint8_t*>(src.data()), static_cast<int>(src.size()), kPtrHost, &smh),
            ncclSuccess);
  ASSERT_EQ(net->regMr(recv, dst.data(), static_cast<int>(dst.size()), kPtrHost, &rmh), ncclSuccess);
  void* gpu_mh = nullptr;
  EXPECT_NE(net->regMr(recv, dst.data(), 16, kPtrCuda, &gpu_mh), ncclSuccess) << "GPU memory must be refused";
  EXPECT_EQ(gpu_mh, nullptr);
  void* data = dst.data();
  int size = static_cast<int>(dst.size());
  int tag = 5;
  void* rreq = nullptr;
  ASSERT_EQ(net->irecv(recv, 1, &data, &size, &tag, &rmh, &rreq), ncclSuccess);
  void* sreq = nullptr;
  ASSERT_TRUE(PollUntil([&] {
    EXPECT_EQ(net->isend(send, const_cast<uint8_t*>(src.data()), static_cast<int>(src.size()), tag, smh, &sreq),
              ncclSuccess);
    return sreq != nullptr;
  }));
  int done = 0, got = 0;
  ASSERT_TRUE(PollUntil([&] {
    EXPECT_EQ(net->test(rreq, &done, &got), ncclSuccess);
    return done != 0;
  }));
  EXPECT_EQ(got, static_cast<int>(src.size()));
  ASSERT_TRUE(PollUntil([&] {
    EXPECT_EQ(net->test(sreq, &done, &got), ncclSuccess);
    return done != 0;
  }));
  EXPECT_EQ(dst, src);
  EXPECT_EQ(net->deregMr(send, smh), ncclSuccess);
  EXPECT_EQ(net->deregMr(recv, rmh), ncclSuccess);
  EXPECT_EQ(net->closeSend(send), ncclSuccess);
  EXPECT_EQ(net->closeRecv(recv), ncclSuccess);
  EXPECT_EQ(net->closeListen(listen), ncclSuccess);
}

TEST(NcclNet, PeerClosingFailsPendingReceive) {
  Pair<ncclNet_v11_t> p;
  ASSERT_NO_FATAL_FAILURE(ConnectV11(&p));
  std::vector<uint8_t> buf(64);
  void* data = buf.data();
  size_t size = buf.size();
  int tag = 1;
  void* mh = nullptr;
  void* rreq = nullptr;
  ASSERT_EQ(p.net->irecv(p.recv, 1, &data, &size, &tag, &mh, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(p.net->closeSend(p.send), ncclSuccess);
  int done = 0;
  ncclResult_t rc = ncclSuccess;
  ASSERT_TRUE(PollUntil([&] {
    rc = p.net->test(rreq, &done, nullptr);
    return rc != ncclSuccess || done;
  }));
  EXPECT_EQ(rc, ncclRemoteError);
  EXPECT_EQ(done, 0);
  EXPECT_EQ(p.net->closeRecv(p.recv), ncclSuccess);
  EXPECT_EQ(p.net->closeListen(p.listen), ncclSuccess);
  EXPECT_EQ(p.net->finalize(p.ctx), ncclSuccess);
}

}  // namespace
}  // namespace optcast::nccl::test
