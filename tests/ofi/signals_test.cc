// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Using the ofi transport leaves the process's signal handlers as they were. libfabric.so.1 pulls
// in libraries whose constructors install handlers of their own (Debian's links libinfinipath,
// which takes SIGINT, SIGTERM, SIGABRT, SIGILL, SIGSEGV and SIGBUS and calls exit() from the
// handler); a program that loads the NCCL plugin or the client library keeps its own. Its own
// executable: the check means something only in a process that has not loaded libfabric yet.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "pair.h"

namespace optcast::transport {
namespace {

volatile sig_atomic_t g_last_signal = 0;
void Record(int sig) { g_last_signal = sig; }

// Each standard signal's handler and whether it takes siginfo.
struct Disposition {
  void* handler = nullptr;
  bool siginfo = false;
};
std::array<Disposition, 32> Snapshot() {
  std::array<Disposition, 32> d{};
  for (int sig = 1; sig < 32; ++sig) {
    struct sigaction sa {};
    if (sigaction(sig, nullptr, &sa) != 0) continue;
    d[sig].siginfo = (sa.sa_flags & SA_SIGINFO) != 0;
    d[sig].handler = d[sig].siginfo ? reinterpret_cast<void*>(sa.sa_sigaction) : reinterpret_cast<void*>(sa.sa_handler);
  }
  return d;
}

TEST(OfiSignals, AConnectionOverLibfabricLeavesTheProcessSignalHandlersAsTheyWere) {
  ASSERT_EQ(dlopen("libfabric.so.1", RTLD_NOW | RTLD_NOLOAD), nullptr)
      << "libfabric is loaded already, so its libraries' constructors have run: run this test in a fresh process";
  // The program's own handlers, as a training script or launcher would have them.
  for (int sig : {SIGINT, SIGTERM, SIGABRT, SIGUSR1}) {
    struct sigaction sa {};
    sa.sa_handler = Record;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(sig, &sa, nullptr), 0);
  }
  const auto before = Snapshot();

  Pair p;
  ASSERT_TRUE(MakePair(&p).ok());
  std::vector<uint8_t> payload(1000, 3);
  const uint8_t meta[1] = {1};
  p.client->Send(MakeOutMessage(meta, payload.data(), payload.size()));
  Collector at_server;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (at_server.completed < 1 && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(p.client->Flush().ok());
    ASSERT_TRUE(p.server->ReadAvailable(at_server).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(at_server.completed, 1u) << "the message never arrived";
  EXPECT_EQ(at_server.payloads[0], payload);
  ASSERT_NE(dlopen("libfabric.so.1", RTLD_NOW | RTLD_NOLOAD), nullptr) << "the connection did not load libfabric";

  const auto after = Snapshot();
  for (int sig = 1; sig < 32; ++sig) {
    EXPECT_EQ(after[sig].handler, before[sig].handler) << "the handler of signal " << sig << " (" << strsignal(sig)
                                                       << ") changed while the ofi transport loaded libfabric";
    EXPECT_EQ(after[sig].siginfo, before[sig].siginfo) << "signal " << sig;
  }
  // And the program's handlers still run.
  for (int sig : {SIGINT, SIGTERM}) {
    g_last_signal = 0;
    ASSERT_EQ(raise(sig), 0);
    EXPECT_EQ(g_last_signal, sig) << strsignal(sig) << " did not reach the program's handler";
  }
}

}  // namespace
}  // namespace optcast::transport
