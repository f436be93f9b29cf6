// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// What only the ofi transport has: libfabric's symbol versions, the registration cache, provider
// selection and its errors, a tcp peer at an ofi end, RDMA devices. What every transport must do
// (messages, order, closes, limits, dialing) is tests/transport/contract_test.cc, over ofi too.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "transport/factory.h"
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

}  // namespace
}  // namespace optcast::transport
