// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A job that fails while a chunk's payload is on its way: the buffer that payload lands in must
// stay allocated until the sender's connection is gone, because a transport that receives
// straight into memory (ofi) keeps the receive posted there and writes whenever the bytes come.

#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "raw_client.h"
#include "transport/factory.h"
#include "wire/protocol.h"

namespace optcast::e2e {
namespace {

// Records every message a server sends to one connection (meta only), but heartbeats, which come
// every 250 ms whatever else happens.
struct Inbox : transport::MessageHandler {
  std::vector<wire::Message> got;
  std::vector<uint8_t> sink;
  Status OnMessageMeta(transport::Connection&, std::span<const uint8_t> meta, uint64_t payload_len,
                       uint8_t** dst) override {
    wire::Message m;
    OPTCAST_RETURN_IF_ERROR(wire::Decode(meta, &m));
    if (m.type == wire::MsgType::kHeartbeat) return Status::Ok();
    got.push_back(std::move(m));
    sink.resize(payload_len);
    *dst = sink.data();
    return Status::Ok();
  }
  Status OnMessageComplete(transport::Connection&) override { return Status::Ok(); }
};

struct RawRank {
  std::unique_ptr<transport::Connection> conn;
  Inbox inbox;

  // Sends `meta` announcing `announced` payload bytes, and sends `sent` of them (from zeros).
  bool Send(const std::vector<uint8_t>& meta, uint64_t announced, uint64_t sent) {
    static const std::vector<uint8_t> zeros(size_t{8} << 20);
    transport::OutMessage m = transport::MakeOutMessage(meta, zeros.data(), announced);
    m.payload_len = sent;  // the header still says `announced`
    conn->Send(std::move(m));
    return conn->Flush().ok();
  }
  // Drives the connection until `done()` or `limit`; false on timeout.
  template <typename Done>
  bool PumpUntil(Done&& done, milliseconds limit = milliseconds(5000)) {
    const auto deadline = Clock::now() + limit;
    while (!done()) {
      if (Clock::now() >= deadline) return false;
      pollfd p{conn->fd(), POLLIN, 0};
      ::poll(&p, 1, 10);
      (void)conn->ReadAvailable(inbox);
      (void)conn->Flush();
    }
    return true;
  }
};

TEST(E2eFaults, FailedJobKeepsTheBufferOfAPayloadInFlightUntilItsConnectionEnds) {
  ServerFarm farm;
  ASSERT_TRUE(farm.Start(1).ok());
  server::ServerOptions opts = TestServerOptions();
  const transport::Endpoint ep{"127.0.0.1", farm.port(0)};
  const JobId job = JobId::Random();
  constexpr uint32_t kCount = 1u << 20;  // 4 MiB of float32
  RawRank ranks[2];
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(
        transport::Dial(opts.transport, ep, Deadline::After(milliseconds(5000)), uint64_t{64} << 20, &ranks[r].conn)
            .ok());
    ASSERT_TRUE(ranks[r].Send(HelloMeta(job, 2, r), 0, 0));
    ASSERT_TRUE(ranks[r].PumpUntil([&] { return !ranks[r].inbox.got.empty(); })) << "no welcome for rank " << r;
    ASSERT_EQ(ranks[r].inbox.got[0].type, wire::MsgType::kWelcome);
  }
  wire::Chunk c;
  c.desc.coll_seq = 1;
  c.desc.count = kCount;
  c.desc.server_elems = kCount;
  c.ref.count = kCount;
  // Rank 0 announces its chunk and holds the payload back: the server now has a destination
  // buffer with a receive pending on it.
  ASSERT_TRUE(ranks[0].Send(wire::EncodeChunk(c), uint64_t{kCount} * 4, 0));
  const auto deadline = Clock::now() + milliseconds(5000);
  while (farm.server(0).stats().buffer_bytes_outstanding == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_GE(farm.server(0).stats().buffer_bytes_outstanding, uint64_t{kCount} * 4);
  // Rank 1 disagrees on the data type: the job fails.
  c.desc.dtype = DataType::kFloat16;
  ASSERT_TRUE(ranks[1].Send(wire::EncodeChunk(c), uint64_t{kCount} * 2, uint64_t{kCount} * 2));
  for (RawRank& r : ranks) {
    ASSERT_TRUE(r.PumpUntil([&] { return r.inbox.got.size() >= 2; })) << "no error";
    EXPECT_EQ(r.inbox.got[1].type, wire::MsgType::kError);
  }
  EXPECT_EQ(farm.server(0).stats().jobs_failed, 1u);
  // Rank 0's payload may still arrive, and lands in that buffer: it must not be freed or reused.
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_GE(farm.server(0).stats().buffer_bytes_outstanding, uint64_t{kCount} * 4)
      << "the failed job's receive buffer was released while a payload could still land in it";
  // Once the connections are gone, nothing is held.
  ranks[0].conn.reset();
  ranks[1].conn.reset();
  EXPECT_EQ(farm.WaitIdle(), "");
}

}  // namespace
}  // namespace optcast::e2e
