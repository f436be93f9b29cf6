// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Messages a peer sent that were never read when a connection closes. ofi_rxm (libfabric 1.x)
// holds each in a buffer of its own and never frees it with the endpoint: the connection drops
// them before it closes. This suite runs without the LeakSanitizer suppressions of the other ofi
// suites, so under AddressSanitizer a message left behind fails it at exit.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "pair.h"

namespace optcast::transport {
namespace {

using std::chrono::milliseconds;

// Both ends progress; the client delivers nothing, so its provider takes the messages in and
// holds them: 16 headers land in the posted header receives, the rest and every payload arrive
// with no receive for them (the 4 KiB ones in full, the 1 MiB one as a rendezvous request).
void SendUnread(Pair& p, std::vector<uint8_t>& small, std::vector<uint8_t>& big) {
  const uint8_t meta[1] = {7};
  for (int i = 0; i < 24; ++i) p.server->Send(MakeOutMessage(meta, small.data(), small.size()));
  p.server->Send(MakeOutMessage(meta, big.data(), big.size()));
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(p.server->Flush().ok());
    ASSERT_TRUE(p.client->Flush().ok());
    std::this_thread::sleep_for(milliseconds(2));
  }
}

TEST(OfiUnreadMessages, AreDroppedWhenTheReaderClosesWhileThePeerIsAlive) {
  for (int round = 0; round < 3; ++round) {
    Pair p;
    Status st = MakePair(&p);
    ASSERT_TRUE(st.ok()) << st.message();
    std::vector<uint8_t> small(4096, static_cast<uint8_t>(round)), big(1 << 20, static_cast<uint8_t>(round));
    SendUnread(p, small, big);
    const auto t0 = std::chrono::steady_clock::now();
    p.client.reset();
    // Nothing of the client's is in a transfer, so closing waits for nothing.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(400));
    // The server sees the end of the connection, as an error or a closed peer, not a hang.
    bool seen = false;
    const auto until = std::chrono::steady_clock::now() + milliseconds(5000);
    while (!seen && std::chrono::steady_clock::now() < until) {
      seen = !p.server->Flush().ok() || !p.server->DiscardAvailable();
      std::this_thread::sleep_for(milliseconds(2));
    }
    EXPECT_TRUE(seen) << "the server never saw the client go";
  }
}

TEST(OfiUnreadMessages, AreDroppedWhenThePeerHasGoneFirst) {
  for (int round = 0; round < 3; ++round) {
    Pair p;
    Status st = MakePair(&p);
    ASSERT_TRUE(st.ok()) << st.message();
    std::vector<uint8_t> small(4096, static_cast<uint8_t>(round)), big(1 << 20, static_cast<uint8_t>(round));
    SendUnread(p, small, big);
    p.server.reset();
    // The client's provider sees the end of the connection before it closes its own end.
    for (int i = 0; i < 20; ++i) {
      (void)p.client->Flush();
      std::this_thread::sleep_for(milliseconds(2));
    }
    const auto t0 = std::chrono::steady_clock::now();
    p.client.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(400));
  }
}

}  // namespace
}  // namespace optcast::transport
