// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A server that dies halfway through sending an in-place allreduce's result: each rank has half
// of that chunk's result and none has it whole. The rank keeps its input intact until a result is
// complete, so the survivors re-run the chunk from the ranks' inputs and every rank gets the
// exact sum. The dying server is scripted on a raw socket, so that it always dies mid-result.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "harness.h"
#include "optcast/communicator.h"
#include "raw_client.h"

namespace optcast::e2e {
namespace {

// Welcomes every rank, takes each rank's first chunk, sends each the result's header and half of
// its payload, then closes its side (FIN) and answers nothing more.
class HalfResultServer {
 public:
  ~HalfResultServer() {
    if (thread_.joinable()) thread_.join();
    for (int fd : conns_) ::close(fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  bool Listen() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return false;
    }
    port_ = ntohs(a.sin_port);
    return true;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  void Start(int nranks) {
    thread_ = std::thread([this, nranks] { ok_ = Run(nranks); });
  }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  bool ok() const { return ok_; }
  const std::string& what() const { return what_; }
  uint32_t cut_elems() const { return cut_elems_; }

 private:
  bool Fail(const std::string& why) {
    what_ = why;
    return false;
  }

  bool Run(int nranks) {
    for (int r = 0; r < nranks; ++r) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 10000) != 1) return Fail("no rank connected within 10 s");
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return Fail("accept failed");
      timeval tv{5, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      conns_.push_back(fd);
    }
    for (int fd : conns_) {
      const RawReply hello = ReadReply(fd);
      if (hello.kind != RawReply::kFrame || hello.msg.type != wire::MsgType::kHello) return Fail("no hello");
      if (!SendRaw(fd, Frame(wire::EncodeWelcome({1u << 20, 30000}), 0))) return Fail("welcome not sent");
    }
    std::vector<wire::ChunkDone> first(conns_.size());
    for (size_t i = 0; i < conns_.size(); ++i) {
      for (;;) {
        const RawReply m = ReadReply(conns_[i]);
        if (m.kind != RawReply::kFrame) return Fail("a rank's connection ended before its first chunk");
        std::vector<uint8_t> payload(m.payload_len);
        size_t got = 0;
        while (got < payload.size()) {
          const ssize_t n = ::recv(conns_[i], payload.data() + got, payload.size() - got, 0);
          if (n <= 0) return Fail("a chunk's payload was cut short");
          got += static_cast<size_t>(n);
        }
        if (m.msg.type == wire::MsgType::kChunk) {
          first[i] = {m.msg.chunk.desc.coll_seq, m.msg.chunk.ref};
          break;
        }
      }
    }
    for (size_t i = 0; i < conns_.size(); ++i) {
      const uint64_t bytes = uint64_t{first[i].ref.count} * sizeof(float);
      cut_elems_ = first[i].ref.count / 2;
      // Half of a result whose every element is wrong: whatever lands of it must not count.
      std::vector<uint8_t> half(cut_elems_ * sizeof(float), 0xff);
      if (!SendRaw(conns_[i], Concat(Frame(wire::EncodeResult(first[i]), bytes), half))) {
        return Fail("half a result not sent");
      }
    }
    for (int fd : conns_) ::shutdown(fd, SHUT_WR);
    return true;
  }

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<int> conns_;
  std::thread thread_;
  std::atomic<bool> ok_{false};
  std::string what_;
  uint32_t cut_elems_ = 0;
};

TEST(E2eFailoverMidResult, AServerDyingHalfwayThroughAnInPlaceResultLeavesEveryRankTheExactSum) {
  if (OverFabric()) GTEST_SKIP() << kRawBytesNeedTcp;
  constexpr int kRanks = 2;
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(2).ok());
  HalfResultServer dying;
  ASSERT_TRUE(dying.Listen());
  dying.Start(kRanks);
  // The scripted server first: it takes a share of every collective.
  std::vector<std::string> servers = {dying.address()};
  for (const std::string& a : farm.addresses()) servers.push_back(a);
  const JobId job = JobId::Random();
  // 3 shards of 64 KiB, two chunks each: within what a rank keeps a copy of for failover.
  constexpr size_t kCount = 3 * 16384;
  std::vector<Status> st(kRanks);
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(kCount));
  std::vector<uint32_t> servers_left(kRanks, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      CommConfig c;
      c.timeout = milliseconds(20000);
      std::unique_ptr<Communicator> comm;
      st[r] = MakeComm(servers, job, kRanks, r, c, &comm);
      if (!st[r].ok()) return;
      for (size_t i = 0; i < kCount; ++i) data[r][i] = static_cast<float>((r + 1) * static_cast<int>(i % 1000));
      st[r] = comm->AllReduce(data[r].data(), data[r].data(), kCount, DataType::kFloat32, RedOp::kSum);
      if (!st[r].ok()) return;
      // The job goes on over the two servers left.
      std::vector<float> more(kCount, static_cast<float>(r + 1)), sum(kCount);
      st[r] = comm->AllReduce(more.data(), sum.data(), kCount, DataType::kFloat32, RedOp::kSum);
      if (st[r].ok() && (sum[0] != 3.0f || sum[kCount - 1] != 3.0f)) st[r] = InternalError("the second sum is wrong");
      servers_left[r] = comm->failover_stats().servers_left;
    });
  }
  for (auto& t : ranks) t.join();
  dying.Join();
  ASSERT_TRUE(dying.ok()) << dying.what();
  ASSERT_GT(dying.cut_elems(), 0u);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(servers_left[r], 2u) << "rank " << r;
    size_t wrong = 0;
    for (size_t i = 0; i < kCount; ++i) wrong += data[r][i] != static_cast<float>(3 * static_cast<int>(i % 1000));
    EXPECT_EQ(wrong, 0u) << "rank " << r << ": elements differ from the sum of the inputs";
  }
}

}  // namespace
}  // namespace optcast::e2e
