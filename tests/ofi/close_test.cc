// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Closing a connection over ofi_rxm (libfabric 1.x) while messages are still arriving
// (FabricConnection::Quiesce). ofi_rxm handles the completions still queued for a connection only
// after closing its endpoint, so the connection first cancels the receives no message has matched
// and lets the matched ones end; and ofi_rxm never frees the messages that arrived with no receive
// for them, so the connection drops those itself. The process-wide counts of both are checked.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "pair.h"
#include "transport/ofi/connection.h"

namespace optcast::transport {
namespace {

using ofi::FabricConnection;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The server sends 24 messages of 4 KiB and one of 1 MiB; both ends progress, the client reads
// nothing. Its provider takes the messages in and holds them: 16 headers land in the posted header
// receives; the other 9 headers and every payload (the 4 KiB ones whole, the 1 MiB one as a
// rendezvous request) have no receive: 34 messages unread.
void SendUnread(Pair& p, const std::vector<uint8_t>& small, const std::vector<uint8_t>& big) {
  const uint8_t meta[1] = {7};
  for (int i = 0; i < 24; ++i) p.server->Send(MakeOutMessage(meta, small.data(), small.size()));
  p.server->Send(MakeOutMessage(meta, big.data(), big.size()));
  // The eager sends complete once written; the rendezvous one only when read, which never comes.
  const auto until = steady_clock::now() + milliseconds(10000);
  while (p.server->PendingWriteCount() > 1 && steady_clock::now() < until) {
    ASSERT_TRUE(p.server->Flush().ok());
    ASSERT_TRUE(p.client->Flush().ok());
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_LE(p.server->PendingWriteCount(), 1u) << "the server's eager sends never completed";
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(p.client->Flush().ok());
    std::this_thread::sleep_for(milliseconds(1));
  }
}

TEST(OfiClose, AnIdleConnectionCancelsItsHeaderReceivesAndClosesWithoutWaiting) {
  for (int round = 0; round < 3; ++round) {
    Pair p;
    ASSERT_TRUE(MakePair(&p).ok());
    // One message each way, delivered: both ends have their 16 header receives posted again.
    std::vector<uint8_t> payload(100, 1);
    const uint8_t meta[1] = {1};
    p.client->Send(MakeOutMessage(meta, payload.data(), payload.size()));
    p.server->Send(MakeOutMessage(meta, payload.data(), payload.size()));
    Collector at_client, at_server;
    const auto until = steady_clock::now() + milliseconds(10000);
    while ((at_client.completed < 1 || at_server.completed < 1) && steady_clock::now() < until) {
      ASSERT_TRUE(p.client->Flush().ok());
      ASSERT_TRUE(p.server->Flush().ok());
      ASSERT_TRUE(p.client->ReadAvailable(at_client).ok());
      ASSERT_TRUE(p.server->ReadAvailable(at_server).ok());
      std::this_thread::sleep_for(milliseconds(1));
    }
    ASSERT_EQ(at_client.completed, 1u);
    ASSERT_EQ(at_server.completed, 1u);
    const uint64_t waited = FabricConnection::ClosesWithATransferInFlight();
    p.client.reset();
    p.server.reset();
    // A header receive left uncancelled would keep the close waiting until it gave up.
    EXPECT_EQ(FabricConnection::ClosesWithATransferInFlight(), waited);
  }
}

TEST(OfiClose, MessagesNeverReadAreDroppedWhenTheReaderClosesWhileThePeerIsAlive) {
  for (int round = 0; round < 3; ++round) {
    std::vector<uint8_t> small(4096, static_cast<uint8_t>(round)), big(1 << 20, static_cast<uint8_t>(round));
    Pair p;
    ASSERT_TRUE(MakePair(&p).ok());
    ASSERT_NO_FATAL_FAILURE(SendUnread(p, small, big));
    const uint64_t dropped = FabricConnection::UnreadMessagesDropped();
    const uint64_t waited = FabricConnection::ClosesWithATransferInFlight();
    p.client.reset();
    const uint64_t n = FabricConnection::UnreadMessagesDropped() - dropped;
    std::printf("round %d: %llu unread messages dropped\n", round, static_cast<unsigned long long>(n));
    EXPECT_GE(n, 25u) << "at least the 24 eager payloads and the rendezvous request";
    EXPECT_LE(n, 34u);
    EXPECT_EQ(FabricConnection::ClosesWithATransferInFlight(), waited);
    // The server sees the end of the connection, as an error or a closed peer, not a hang.
    bool seen = false;
    const auto until = steady_clock::now() + milliseconds(5000);
    while (!seen && steady_clock::now() < until) {
      seen = !p.server->Flush().ok() || !p.server->DiscardAvailable();
      std::this_thread::sleep_for(milliseconds(2));
    }
    EXPECT_TRUE(seen) << "the server never saw the client go";
  }
}

TEST(OfiClose, MessagesNeverReadAreDroppedWhenThePeerHasGoneFirst) {
  for (int round = 0; round < 3; ++round) {
    std::vector<uint8_t> small(4096, static_cast<uint8_t>(round)), big(1 << 20, static_cast<uint8_t>(round));
    Pair p;
    ASSERT_TRUE(MakePair(&p).ok());
    ASSERT_NO_FATAL_FAILURE(SendUnread(p, small, big));
    p.server.reset();
    // The client's provider sees the end of the connection before it closes its own end.
    for (int i = 0; i < 20; ++i) {
      (void)p.client->Flush();
      std::this_thread::sleep_for(milliseconds(2));
    }
    const uint64_t dropped = FabricConnection::UnreadMessagesDropped();
    p.client.reset();
    const uint64_t n = FabricConnection::UnreadMessagesDropped() - dropped;
    std::printf("round %d: %llu unread messages dropped\n", round, static_cast<unsigned long long>(n));
    EXPECT_GE(n, 25u);
    EXPECT_LE(n, 34u);
  }
}

// The reader posts the receive for the 1 MiB payload, which matches its rendezvous request and
// starts the read; the peer, on this same thread, cannot serve it while the reader closes. The
// close waits for it, up to its bound, then closes anyway: counted, and without harm (the read's
// completion never comes, so ofi_rxm has nothing to answer on the closed endpoint).
TEST(OfiClose, AReaderClosingMidTransferFromAStalledPeerWaitsItsBoundThenCloses) {
  std::vector<uint8_t> big(1 << 20, 5);
  Pair p;
  ASSERT_TRUE(MakePair(&p).ok());
  const uint8_t meta[1] = {3};
  p.server->Send(MakeOutMessage(meta, big.data(), big.size()));
  Collector at_client;
  const auto until = steady_clock::now() + milliseconds(10000);
  while (at_client.metas.empty() && steady_clock::now() < until) {
    ASSERT_TRUE(p.server->Flush().ok());
    ASSERT_TRUE(p.client->ReadAvailable(at_client).ok());
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(at_client.metas.size(), 1u);
  ASSERT_EQ(at_client.completed, 0u) << "the payload arrived before the close: nothing left to test";
  const uint64_t waited = FabricConnection::ClosesWithATransferInFlight();
  const auto t0 = steady_clock::now();
  p.client.reset();
  const auto took = steady_clock::now() - t0;
  EXPECT_EQ(FabricConnection::ClosesWithATransferInFlight(), waited + 1);
  EXPECT_GE(took, milliseconds(450));
  EXPECT_LT(took, milliseconds(5000));
}

}  // namespace
}  // namespace optcast::transport
