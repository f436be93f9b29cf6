// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "pair.h"
#include "transport/factory.h"
#include "transport/ofi/connection.h"
#include "transport/ofi/fabric.h"
#include "transport/ofi/libfabric.h"

namespace optcast::transport {
namespace {

using std::chrono::milliseconds;

// libfabric is loaded with dlopen (ofi/libfabric.h) and its functions bound by symbol version.
// Each version named must be the one a program linked against this machine's libfabric, whose
// headers the transport is compiled with, would bind: its default version. A wrong (older)
// version would hand over structures of another layout without a word.
TEST(Libfabric, BindsTheVersionsALinkedProgramWouldGet) {
  ASSERT_TRUE(ofi::LoadLibfabric().ok()) << ofi::LoadLibfabric().ToString();
  void* lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  for (const ofi::LibfabricSymbol& s : ofi::kLibfabricSymbols) {
    void* bound = dlvsym(lib, s.name, s.version);
    EXPECT_NE(bound, nullptr) << s.name << "@" << s.version;
    EXPECT_EQ(bound, dlsym(lib, s.name)) << s.name << "@" << s.version << " is not the default version";
  }
  EXPECT_EQ(reinterpret_cast<void*>(ofi::Libfabric().getinfo), dlvsym(lib, "fi_getinfo", "FABRIC_1.3"));
  dlclose(lib);
}

// Drives both ends until `done` holds or the limit passes.
bool Pump(Connection& a, MessageHandler& ha, Connection& b, MessageHandler& hb, const std::function<bool()>& done,
          milliseconds limit = milliseconds(10000)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    if (!a.Flush().ok() || !b.Flush().ok()) return false;
    pollfd p[2] = {{a.fd(), POLLIN, 0}, {b.fd(), POLLIN, 0}};
    ::poll(p, 2, 20);
    if ((p[0].revents & POLLIN) && !a.ReadAvailable(ha).ok()) return false;
    if ((p[1].revents & POLLIN) && !b.ReadAvailable(hb).ok()) return false;
  }
  return true;
}

// Reads `c` as its descriptor allows until a read fails or 5 s pass; that read's status.
Status ReadUntilError(Connection& c, MessageHandler& h) {
  Status st;
  const auto until = std::chrono::steady_clock::now() + milliseconds(5000);
  while (st.ok() && std::chrono::steady_clock::now() < until) {
    pollfd pf{c.fd(), POLLIN, 0};
    ::poll(&pf, 1, 20);
    st = c.ReadAvailable(h);
  }
  return st;
}

TEST(OfiTransport, MessagesWithPayloadsArriveInOrderAndIntactBothWays) {
  Pair p;
  Status st = MakePair(&p);
  ASSERT_TRUE(st.ok()) << st.message();
  std::mt19937 rng(7);
  // Sizes around the provider's inline and eager limits, and one of several MiB.
  const std::vector<size_t> sizes = {0, 1, 63, 64, 65, 4096, 16384, 65537, 1 << 20, (5 << 20) + 3};
  std::vector<std::vector<uint8_t>> sent;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<uint8_t> data(sizes[i]);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    sent.push_back(std::move(data));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint8_t meta[3] = {static_cast<uint8_t>(i), 0xab, 0xcd};
    p.client->Send(MakeOutMessage(meta, sent[i].data(), sent[i].size()));
    p.server->Send(MakeOutMessage(meta, sent[i].data(), sent[i].size()));
  }
  Collector at_server, at_client;
  ASSERT_TRUE(Pump(*p.client, at_client, *p.server, at_server,
                   [&] {
                     // Every message delivered, and every send's completion seen by its sender
                     // (which may come after the receiver has the data).
                     return at_server.completed == sizes.size() && at_client.completed == sizes.size() &&
                            !p.client->HasPendingWrites() && !p.server->HasPendingWrites();
                   }))
      << "server got " << at_server.completed << ", client " << at_client.completed << " of " << sizes.size();
  for (const Collector* c : {&at_server, &at_client}) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      ASSERT_EQ(c->metas[i].size(), 3u);
      EXPECT_EQ(c->metas[i][0], i);
      EXPECT_EQ(c->payloads[i], sent[i]) << "message " << i << " of " << sizes[i] << " bytes";
    }
  }
}

// Numbering and delivery under stress: many messages both ways, of sizes on both sides of
// ofi_rxm's eager limit and some without payload (as heartbeats are), with each end now and then
// not reading for a while so that headers queue up unexpected at the provider: every message must
// arrive whole and in order. The provider here reports completions in matching order, so this
// cannot make it reorder them (the case the connection numbers by posting order for); a
// misnumbered message fails it by contents or by stalling.
TEST(OfiTransport, ManyMessagesBothWaysKeepTheirOrderWhileTheReceiversLag) {
  Pair p;
  Status st = MakePair(&p);
  ASSERT_TRUE(st.ok()) << st.message();
  constexpr size_t kMessages = 400;
  const std::vector<size_t> sizes = {0, 0, 20, 3000, 4097, 65537, 140 * 1024, 600 * 1024};
  std::mt19937 rng(11);
  auto content = [](size_t index, size_t len) {
    std::vector<uint8_t> data(len);
    uint32_t x = static_cast<uint32_t>(index) * 2654435761u + 1;
    for (auto& b : data) {
      x = x * 1664525u + 1013904223u;
      b = static_cast<uint8_t>(x >> 24);
    }
    return data;
  };
  std::vector<std::vector<uint8_t>> sent(kMessages);
  for (size_t i = 0; i < kMessages; ++i) sent[i] = content(i, sizes[rng() % sizes.size()]);
  // Each end sends the same messages, queued in bursts between pumps as a server's loop would.
  Collector at_server, at_client;
  size_t queued = 0;
  auto queue_some = [&] {
    const size_t n = std::min<size_t>(kMessages - queued, 1 + rng() % 24);
    for (size_t k = 0; k < n; ++k, ++queued) {
      uint8_t meta[4];
      std::memcpy(meta, &queued, 4);
      p.client->Send(MakeOutMessage(meta, sent[queued].data(), sent[queued].size()));
      p.server->Send(MakeOutMessage(meta, sent[queued].data(), sent[queued].size()));
    }
  };
  Connection* ends[2] = {p.client.get(), p.server.get()};
  Collector* handlers[2] = {&at_client, &at_server};
  int lagging[2] = {0, 0};  // passes an end still skips reading
  const auto until = std::chrono::steady_clock::now() + milliseconds(60000);
  while (at_server.completed < kMessages || at_client.completed < kMessages || ends[0]->HasPendingWrites() ||
         ends[1]->HasPendingWrites()) {
    ASSERT_LT(std::chrono::steady_clock::now(), until)
        << "stalled: server got " << at_server.completed << ", client " << at_client.completed << " of " << kMessages
        << "; " << queued << " queued";
    if (queued < kMessages && rng() % 4 == 0) queue_some();
    for (int e = 0; e < 2; ++e) {
      st = ends[e]->Flush();
      ASSERT_TRUE(st.ok()) << st.message();
      if (lagging[e] > 0) {
        --lagging[e];
        continue;
      }
      if (rng() % 16 == 0) lagging[e] = 1 + static_cast<int>(rng() % 40);
      pollfd pf{ends[e]->fd(), POLLIN, 0};
      ::poll(&pf, 1, 0);
      if (pf.revents & POLLIN) {
        st = ends[e]->ReadAvailable(*handlers[e]);
        ASSERT_TRUE(st.ok()) << st.message();
      }
    }
    if (lagging[0] > 0 || lagging[1] > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    else {
      pollfd pf[2] = {{ends[0]->fd(), POLLIN, 0}, {ends[1]->fd(), POLLIN, 0}};
      ::poll(pf, 2, 5);
    }
  }
  for (const Collector* c : {&at_server, &at_client}) {
    ASSERT_EQ(c->metas.size(), kMessages);
    for (size_t i = 0; i < kMessages; ++i) {
      uint32_t index = 0;
      ASSERT_EQ(c->metas[i].size(), 4u);
      std::memcpy(&index, c->metas[i].data(), 4);
      ASSERT_EQ(index, i) << "message " << i << " arrived as the " << i << "th";
      ASSERT_EQ(c->payloads[i], sent[i]) << "message " << i << " of " << sent[i].size() << " bytes";
    }
  }
}

TEST(OfiTransport, ClosingOneEndIsSeenByTheOtherAfterItsLastMessage) {
  Pair p;
  ASSERT_TRUE(MakePair(&p).ok());
  const uint8_t meta[1] = {42};
  bool sent = false;
  auto m = MakeOutMessage(meta, nullptr, 0);
  m.on_done = [&] { sent = true; };
  p.server->Send(std::move(m));
  Collector at_server, at_client;
  ASSERT_TRUE(Pump(*p.client, at_client, *p.server, at_server, [&] { return sent; }));
  p.server->ShutdownWrite();
  const Status st = ReadUntilError(*p.client, at_client);
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.message();
  ASSERT_EQ(at_client.metas.size(), 1u);
  EXPECT_EQ(at_client.metas[0][0], 42);
}

// Both ends progress for a moment without delivering anything: each provider takes in what
// arrives, which waits there for a receive.
bool ProgressWithoutDelivering(Pair& p) {
  for (int i = 0; i < 20; ++i) {
    if (!p.server->Flush().ok() || !p.client->Flush().ok()) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

// A peer that goes while its last payload waits, announced but unread: the receiver's provider
// has taken in the header and the rendezvous request and then seen the connection end before the
// receiver posts the payload's receive. That receive must end in an error naming the peer, with
// nothing delivered but whole messages, and not touch the provider's freed connection
// (tcp;ofi_rxm 1.17 looks the request's connection up by index when the receive matches it).
TEST(OfiTransport, APayloadFromAPeerThatHasGoneIsAnErrorAndNothingElse) {
  for (int round = 0; round < 6; ++round) {
    Pair p;
    Status st = MakePair(&p);
    ASSERT_TRUE(st.ok()) << st.message();
    // Above the eager limit: by rendezvous (or, 20 KiB, in segments where those are on).
    std::vector<uint8_t> big(round % 2 == 0 ? (1 << 20) : (20 << 10), static_cast<uint8_t>(round));
    const uint8_t meta[1] = {9};
    p.server->Send(MakeOutMessage(meta, big.data(), big.size()));
    // The client's provider takes in the header and the request.
    ASSERT_TRUE(ProgressWithoutDelivering(p));
    p.server.reset();
    // The client's provider sees the end of the connection (and frees its side of it).
    for (int i = 0; i < 10 + 10 * round; ++i) {
      (void)p.client->Flush();
      std::this_thread::sleep_for(milliseconds(2));
    }
    Collector at_client;
    st = ReadUntilError(*p.client, at_client);
    EXPECT_EQ(st.code(), Code::kUnavailable) << st.message();
    EXPECT_NE(st.message().find("127.0.0.1"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("closed by the peer"), std::string::npos) << st.message();
    // Where the provider sends such a payload eagerly, in segments (ofi_rxm without dynamic
    // receive buffers), it may all have arrived: then it is delivered whole, and then the error.
    ASSERT_LE(at_client.completed, 1u);
    if (at_client.completed == 1) {
      EXPECT_EQ(at_client.payloads[0], big);
    }
  }
}

// A sender whose peer has gone with messages still to read must hear of it as the end of the
// connection, naming the peer, and deliver nothing. tcp;ofi_rxm 1.17 completes none of the sends
// still queued for that peer, with or without an error: the end shows on the read side, which the
// connection loops always drive alongside their writes.
TEST(OfiTransport, SendsToAPeerThatHasGoneEndInAnErrorNamingIt) {
  for (int round = 0; round < 3; ++round) {
    Pair p;
    Status st = MakePair(&p);
    ASSERT_TRUE(st.ok()) << st.message();
    // Eager messages and rendezvous ones, more than the peer's provider takes in unread.
    std::vector<uint8_t> big(1 << 20, 7), small(4096, 3);
    const uint8_t meta[1] = {5};
    for (int i = 0; i < 8; ++i) {
      p.server->Send(MakeOutMessage(meta, big.data(), big.size()));
      p.server->Send(MakeOutMessage(meta, small.data(), small.size()));
    }
    ASSERT_TRUE(ProgressWithoutDelivering(p));
    p.client.reset();
    const auto until = std::chrono::steady_clock::now() + milliseconds(5000);
    Collector at_server;
    while (st.ok() && std::chrono::steady_clock::now() < until) {
      st = p.server->Flush();
      if (st.ok()) st = p.server->ReadAvailable(at_server);
      std::this_thread::sleep_for(milliseconds(2));
    }
    EXPECT_EQ(st.code(), Code::kUnavailable) << "round " << round << ": " << st.message();
    EXPECT_NE(st.message().find("127.0.0.1"), std::string::npos) << st.message();
    EXPECT_EQ(at_server.completed, 0u);
  }
}

TEST(OfiTransport, OversizedPayloadIsAProtocolError) {
  Pair p;
  ASSERT_TRUE(MakePair(&p, 1u << 20, 1024).ok());
  Connection* client = p.client.get();
  Connection* server = p.server.get();
  std::vector<uint8_t> big(2048);
  const uint8_t meta[1] = {1};
  client->Send(MakeOutMessage(meta, big.data(), big.size()));
  Collector at_server, at_client;
  Status st;
  const auto until = std::chrono::steady_clock::now() + milliseconds(5000);
  while (st.ok() && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(client->Flush().ok());
    pollfd pf{server->fd(), POLLIN, 0};
    ::poll(&pf, 1, 20);
    st = server->ReadAvailable(at_server);
  }
  EXPECT_EQ(st.code(), Code::kProtocol) << st.message();
  EXPECT_NE(st.message().find("limit is 1024"), std::string::npos) << st.message();
}

TEST(OfiTransport, MemoryIsRegisteredOncePerRegionAndReused) {
  std::shared_ptr<ofi::Fabric> fabric;
  ASSERT_TRUE(ofi::Fabric::Open("", "127.0.0.1", &fabric).ok());
  ofi::MrCache& cache = fabric->mr_cache();
  std::vector<uint8_t> buf(1 << 20);
  fid_mr* first = nullptr;
  fid_mr* again = nullptr;
  fid_mr* inside = nullptr;
  ASSERT_TRUE(cache.Acquire(buf.data(), buf.size(), &first).ok());
  const uint64_t after_first = cache.registrations();
  ASSERT_TRUE(cache.Acquire(buf.data(), buf.size(), &again).ok());
  ASSERT_TRUE(cache.Acquire(buf.data() + 4096, 1000, &inside).ok());
  EXPECT_EQ(cache.registrations(), after_first);
  EXPECT_EQ(first, again);
  EXPECT_EQ(first, inside);
  std::vector<uint8_t> other(4096);
  fid_mr* second = nullptr;
  Status st = cache.Acquire(other.data(), other.size(), &second);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(cache.registrations(), after_first + 1);
  EXPECT_NE(second, first);
  cache.Release(second);
  cache.Deregister(other.data(), other.size());
  ASSERT_TRUE(cache.Acquire(other.data(), other.size(), &second).ok());
  EXPECT_EQ(cache.registrations(), after_first + 2);
  for (fid_mr* m : {first, again, inside, second}) cache.Release(m);
  EXPECT_EQ(cache.held(), 0u);
}

TEST(OfiTransport, ExplicitRegistrationsServeSendsAndReceivesInTheirRange) {
  std::shared_ptr<ofi::Fabric> fabric;
  ASSERT_TRUE(ofi::Fabric::Open("", "127.0.0.1", &fabric).ok());
  std::vector<uint8_t> buf(1 << 20), other(1 << 16);
  fid_mr* registered = nullptr;
  ASSERT_TRUE(fabric->Register(buf.data(), buf.size(), &registered).ok());
  ASSERT_NE(registered, nullptr) << "an explicit registration registers whatever the provider needs";
  const uint64_t made = fabric->mr_cache().registrations();
  void* desc = nullptr;
  fid_mr* held = nullptr;
  ASSERT_TRUE(fabric->Acquire(buf.data() + 4096, 100000, &desc, &held).ok());
  EXPECT_EQ(held, registered);
  EXPECT_EQ(desc, fi_mr_desc(registered));
  fabric->Release(held);
  ASSERT_TRUE(fabric->Acquire(other.data(), other.size(), &desc, &held).ok());
  if (fabric->local_mr()) {
    EXPECT_NE(held, nullptr) << fabric->provider() << " needs registered memory: registered on first use";
    EXPECT_EQ(fabric->mr_cache().registrations(), made + 1);
  } else {
    EXPECT_EQ(held, nullptr) << fabric->provider() << " needs no registered memory";
    EXPECT_EQ(desc, nullptr);
    EXPECT_EQ(fabric->mr_cache().registrations(), made);
  }
  fabric->Release(held);
  fabric->Release(registered);
  EXPECT_EQ(fabric->mr_cache().held(), 0u);
}

// Page-aligned buffers of `pages` pages each, so that every one is a registration of its own.
struct PageBuffers {
  explicit PageBuffers(size_t n, size_t pages = 1) : page(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    memory.resize((n * (pages + 1) + 1) * page);
    auto base = (reinterpret_cast<uintptr_t>(memory.data()) + page - 1) & ~(page - 1);
    // A page of gap after each, so that neighbours never share a page.
    for (size_t i = 0; i < n; ++i) at.push_back(reinterpret_cast<uint8_t*>(base + i * (pages + 1) * page));
    len = pages * page;
  }
  size_t page;
  size_t len;
  std::vector<uint8_t> memory;
  std::vector<uint8_t*> at;
};

TEST(OfiTransport, TheRegistrationCacheEvictsTheLeastRecentlyUsedPastItsEntryLimit) {
  std::shared_ptr<ofi::Fabric> fabric;
  ASSERT_TRUE(ofi::Fabric::Open("", "127.0.0.1", &fabric).ok());
  ofi::MrCache cache(fabric->domain(), ofi::MrCache::Limits{0, 2});
  PageBuffers b(3);
  // Registers buffer i (or finds its registration) and lets it go again.
  auto use = [&](int i) {
    fid_mr* mr = nullptr;
    ASSERT_TRUE(cache.Acquire(b.at[i], b.len, &mr).ok()) << "buffer " << i;
    cache.Release(mr);
  };
  use(0);
  use(1);
  // Buffer 0 used again: buffer 1 is now the least recently used.
  use(0);
  EXPECT_EQ(cache.registrations(), 2u);
  use(2);
  EXPECT_EQ(cache.registrations(), 3u);
  EXPECT_EQ(cache.regions(), 2u);
  // 0 and 2 are still cached; 1 was evicted and is registered anew.
  use(0);
  use(2);
  EXPECT_EQ(cache.registrations(), 3u);
  use(1);
  EXPECT_EQ(cache.registrations(), 4u);
  EXPECT_EQ(cache.regions(), 2u);
}

TEST(OfiTransport, TheRegistrationCacheKeepsItsBytesWithinTheLimit) {
  std::shared_ptr<ofi::Fabric> fabric;
  ASSERT_TRUE(ofi::Fabric::Open("", "127.0.0.1", &fabric).ok());
  PageBuffers b(4, 4);
  ofi::MrCache cache(fabric->domain(), ofi::MrCache::Limits{2 * b.len, 0});
  fid_mr* mr = nullptr;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(cache.Acquire(b.at[i], b.len, &mr).ok());
    cache.Release(mr);
    EXPECT_LE(cache.bytes(), 2 * b.len);
  }
  EXPECT_EQ(cache.regions(), 2u);
  // The two most recent stay.
  ASSERT_TRUE(cache.Acquire(b.at[3], b.len, &mr).ok());
  cache.Release(mr);
  EXPECT_EQ(cache.registrations(), 4u);
}

TEST(OfiTransport, HeldRegistrationsAreNeverEvicted) {
  std::shared_ptr<ofi::Fabric> fabric;
  ASSERT_TRUE(ofi::Fabric::Open("", "127.0.0.1", &fabric).ok());
  ofi::MrCache cache(fabric->domain(), ofi::MrCache::Limits{0, 1});
  PageBuffers b(3);
  fid_mr* held[3] = {};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache.Acquire(b.at[i], b.len, &held[i]).ok());
  // Over the limit, but every one is held (in flight, or registered by the plugin): all stay,
  // and each is still found instead of registered again.
  EXPECT_EQ(cache.regions(), 3u);
  EXPECT_EQ(cache.held(), 3u);
  fid_mr* again = nullptr;
  ASSERT_TRUE(cache.Acquire(b.at[1], b.len, &again).ok());
  EXPECT_EQ(again, held[1]);
  EXPECT_EQ(cache.registrations(), 3u);
  cache.Release(again);
  // Released ones go as soon as they are free, down to the limit.
  cache.Release(held[0]);
  EXPECT_EQ(cache.regions(), 2u);
  cache.Release(held[1]);
  EXPECT_EQ(cache.regions(), 1u);
  cache.Release(held[2]);
  EXPECT_EQ(cache.regions(), 1u);
  EXPECT_EQ(cache.held(), 0u);
  // A registration deregistered while held closes when it is released, not before.
  ASSERT_TRUE(cache.Acquire(b.at[2], b.len, &again).ok());
  EXPECT_EQ(again, held[2]);
  cache.Deregister(b.at[2], b.len);
  EXPECT_EQ(cache.regions(), 1u);
  cache.Release(again);
  EXPECT_EQ(cache.regions(), 0u);
}

TEST(OfiTransport, TheRegistrationCacheLimitsComeFromTheEnvironment) {
  ::setenv("OPTCAST_OFI_MR_CACHE_BYTES", "64M", 1);
  ::setenv("OPTCAST_OFI_MR_CACHE_ENTRIES", "7", 1);
  ofi::MrCache::Limits limits;
  ASSERT_TRUE(ofi::MrCache::LimitsFromEnvironment(&limits).ok());
  EXPECT_EQ(limits.max_bytes, uint64_t{64} << 20);
  EXPECT_EQ(limits.max_entries, 7u);
  ::setenv("OPTCAST_OFI_MR_CACHE_BYTES", "lots", 1);
  std::shared_ptr<ofi::Fabric> fabric;
  Status st = ofi::Fabric::Open("", "127.0.0.1", &fabric);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("OPTCAST_OFI_MR_CACHE_BYTES='lots'"), std::string::npos) << st.message();
  ::unsetenv("OPTCAST_OFI_MR_CACHE_BYTES");
  ::setenv("OPTCAST_OFI_MR_CACHE_ENTRIES", "-1", 1);
  st = ofi::Fabric::Open("", "127.0.0.1", &fabric);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("OPTCAST_OFI_MR_CACHE_ENTRIES"), std::string::npos) << st.message();
  ::unsetenv("OPTCAST_OFI_MR_CACHE_ENTRIES");
  ASSERT_TRUE(ofi::MrCache::LimitsFromEnvironment(&limits).ok());
  EXPECT_EQ(limits.max_bytes, ofi::MrCache::Limits{}.max_bytes);
}

TEST(OfiTransport, AMissingProviderIsRefusedListingTheAvailableOnes) {
  std::shared_ptr<ofi::Fabric> fabric;
  Status st = ofi::Fabric::Open("no-such-provider", "", &fabric);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'no-such-provider'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("available providers: "), std::string::npos) << st.message();
  // Every provider libfabric lists here is named (tcp always exists in Debian's build).
  const auto available = ofi::AvailableProviders();
  ASSERT_FALSE(available.empty());
  for (const auto& name : available) EXPECT_NE(st.message().find(name), std::string::npos) << name;
  EXPECT_NE(st.message().find("OPTCAST_OFI_PROVIDER"), std::string::npos) << st.message();
}

TEST(OfiTransport, TheProviderComesFromTheEnvironment) {
  ::setenv("OPTCAST_OFI_PROVIDER", "no-such-provider", 1);
  std::unique_ptr<Listener> l;
  Status st = Listen(TransportOptions{Kind::kOfi}, {"127.0.0.1", 0}, &l);
  ::unsetenv("OPTCAST_OFI_PROVIDER");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no-such-provider"), std::string::npos) << st.message();
  ASSERT_TRUE(Listen(TransportOptions{Kind::kOfi}, {"127.0.0.1", 0}, &l).ok());
}

TEST(OfiTransport, ATcpClientAtAnOfiServerAndBackAreToldWhichTransportToUse) {
  std::unique_ptr<Listener> tcp_server;
  ASSERT_TRUE(Listen(TransportOptions{Kind::kTcp}, {"127.0.0.1", 0}, &tcp_server).ok());
  // The tcp server answers an address exchange as garbage with an error frame.
  std::unique_ptr<Connection> c;
  std::unique_ptr<Connection> s;
  std::thread answer([&] {
    const auto until = std::chrono::steady_clock::now() + milliseconds(5000);
    while (!tcp_server->Accept(1024, &s).ok() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    if (!s) return;
    const uint8_t meta[1] = {9};
    s->Send(MakeOutMessage(meta, nullptr, 0));
    (void)s->Flush();
  });
  Status st = Dial(TransportOptions{Kind::kOfi}, {"127.0.0.1", tcp_server->port()}, Deadline::After(milliseconds(5000)),
                   1024, &c);
  answer.join();
  EXPECT_EQ(st.code(), Code::kProtocol) << st.message();
  EXPECT_NE(st.message().find("built-in tcp transport"), std::string::npos) << st.message();
}

// Devices the CI machine lacks: the check runs where one exists.
TEST(OfiTransport, RdmaDevicesAreUsedWhenPresent) {
  for (const char* provider : {"efa", "verbs;ofi_rxm"}) {
    std::shared_ptr<ofi::Fabric> fabric;
    if (!ofi::Fabric::Open(provider, "", &fabric).ok()) continue;
    std::shared_ptr<ofi::Fabric> automatic;
    ASSERT_TRUE(ofi::Fabric::Open("", "", &automatic).ok());
    EXPECT_NE(automatic->provider().find(std::string(provider).substr(0, 4)), std::string::npos)
        << "automatic choice took " << automatic->provider() << " although " << provider << " exists";
    EXPECT_FALSE(fabric->device().name.empty());
    return;
  }
  GTEST_SKIP() << "no efa or verbs device is present on this machine (libfabric lists: " << [] {
    std::string s;
    for (const auto& n : ofi::AvailableProviders()) s += n + " ";
    return s;
  }() << ")";
}

// Dialer::StartDial, for both transports: the dial returns at once, a message sent before the
// connection is up goes out once it is, and nothing ever waits (everything runs on this thread).
class StartDial : public ::testing::TestWithParam<Kind> {};

TEST_P(StartDial, ReturnsAtOnceAndCarriesWhatWasSentBeforeItWasUp) {
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(Listen(TransportOptions{GetParam()}, {"127.0.0.1", 0}, &listener).ok());
  std::unique_ptr<Dialer> dialer;
  ASSERT_TRUE(Dialer::Create(TransportOptions{GetParam()}, &dialer).ok());
  std::unique_ptr<Connection> client, server;
  Status st = dialer->StartDial({"127.0.0.1", listener->port()}, 1u << 20, &client);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<uint8_t> payload(100000);
  std::iota(payload.begin(), payload.end(), uint8_t{0});
  const uint8_t meta[2] = {7, 8};
  client->Send(MakeOutMessage(meta, payload.data(), payload.size()));
  Collector at_server, at_client;
  const auto until = std::chrono::steady_clock::now() + milliseconds(10000);
  while (at_server.completed == 0 || !client->Connected()) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "connected " << client->Connected();
    st = client->Flush();
    ASSERT_TRUE(st.ok()) << st.message();
    pollfd p[2] = {{client->fd(), static_cast<short>(POLLIN | (client->Connected() ? 0 : POLLOUT)), 0},
                   {server ? server->fd() : listener->fd(), POLLIN, 0}};
    ::poll(p, 2, 20);
    if (p[0].revents != 0) {
      st = client->ReadAvailable(at_client);
      ASSERT_TRUE(st.ok()) << st.message();
    }
    if (!server) {
      Status a = listener->Accept(1u << 20, &server);
      ASSERT_TRUE(a.ok() || a.code() == Code::kUnavailable) << a.message();
    } else if (p[1].revents != 0) {
      st = server->ReadAvailable(at_server);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_TRUE(server->Flush().ok());
    }
  }
  ASSERT_EQ(at_server.metas.size(), 1u);
  EXPECT_EQ(at_server.metas[0], std::vector<uint8_t>(meta, meta + 2));
  EXPECT_EQ(at_server.payloads[0], payload);
}

TEST_P(StartDial, ARefusedConnectionIsAnErrorNamingTheAddress) {
  // A port that was just free: nothing listens there.
  uint16_t port = 0;
  {
    std::unique_ptr<Listener> l;
    ASSERT_TRUE(Listen(TransportOptions{Kind::kTcp}, {"127.0.0.1", 0}, &l).ok());
    port = l->port();
  }
  std::unique_ptr<Dialer> dialer;
  ASSERT_TRUE(Dialer::Create(TransportOptions{GetParam()}, &dialer).ok());
  std::unique_ptr<Connection> c;
  Status st = dialer->StartDial({"127.0.0.1", port}, 1024, &c);
  if (!st.ok()) {  // refused before connect() returned: reported at once
    EXPECT_NE(st.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos) << st.message();
    return;
  }
  Collector h;
  const auto until = std::chrono::steady_clock::now() + milliseconds(5000);
  while (st.ok() && std::chrono::steady_clock::now() < until) {
    pollfd p{c->fd(), static_cast<short>(POLLIN | POLLOUT), 0};
    ::poll(&p, 1, 20);
    st = c->ReadAvailable(h);
    if (st.ok()) st = c->Flush();
  }
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(c->Connected());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.message();
  EXPECT_NE(st.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("refused"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Transports, StartDial, ::testing::Values(Kind::kTcp, Kind::kOfi),
                         [](const ::testing::TestParamInfo<Kind>& i) { return std::string(KindName(i.param)); });

}  // namespace
}  // namespace optcast::transport
