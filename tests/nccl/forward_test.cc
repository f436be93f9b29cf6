// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// OPTCAST_NET_PLUGIN: NCCL's point-to-point calls go to another plugin, CollNet stays ours.
// The plugin decides once per process, so every scenario runs in a fresh forked child that
// loads the plugin itself (this parent never does).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "plugin_harness.h"

#ifndef OPTCAST_FAKE_NET_PLUGIN_PATH
#error "OPTCAST_FAKE_NET_PLUGIN_PATH must name the fake net plugin"
#endif

namespace optcast::nccl::test {
namespace {

// Runs `body` in a child process; its return value is the exit code (0 = pass).
int InChild(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = body();
    } catch (...) {
      rc = 2;
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define CHILD_CHECK(cond)                                                           \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

ncclResult_t InitV11(ncclNet_v11_t* net, void** ctx) {
  ncclNetCommConfig_v11_t config{-1};
  return net->init(ctx, 99, &config, TestLogger, nullptr);
}

TEST(NetForwarding, CallsGoToTheOtherPluginAndCollNetStays) {
  EXPECT_EQ(0, InChild([] {
              setenv("OPTCAST_NET_PLUGIN", OPTCAST_FAKE_NET_PLUGIN_PATH, 1);
              setenv("OPTCAST_SERVERS", "127.0.0.1:8918", 1);
              auto* net = Table<ncclNet_v11_t>("ncclNetPlugin_v11");
              void* ctx = nullptr;
              CHILD_CHECK(InitV11(net, &ctx) == ncclSuccess);
              CHILD_CHECK(ctx != nullptr);  // the fake's context
              int ndev = 0;
              CHILD_CHECK(net->devices(&ndev) == ncclSuccess && ndev == 3);
              ncclNetProperties_v11_t p{};
              CHILD_CHECK(net->getProperties(0, &p) == ncclSuccess);
              CHILD_CHECK(std::strcmp(p.name, "fake0") == 0);
              CHILD_CHECK(std::strcmp(net->name, "Optcast") == 0);
              // Our table now holds the fake's functions: no per-call indirection.
              void* fake = dlopen(OPTCAST_FAKE_NET_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD);
              CHILD_CHECK(fake != nullptr);
              auto* fake_net = static_cast<ncclNet_v11_t*>(dlsym(fake, "ncclNetPlugin_v11"));
              CHILD_CHECK(net->isend == fake_net->isend && net->setNetAttr == fake_net->setNetAttr);
              // A second communicator's init reaches the fake again.
              void* ctx2 = nullptr;
              CHILD_CHECK(InitV11(net, &ctx2) == ncclSuccess && ctx2 == ctx);
              CHILD_CHECK(net->finalize(ctx) == ncclSuccess);
              // CollNet is still Optcast's, on this host's own interface.
              auto* cn = Table<ncclCollNet_v11_t>("ncclCollNetPlugin_v11");
              void* cctx = nullptr;
              CHILD_CHECK(cn->init(&cctx, 99, TestLogger) == ncclSuccess);
              CHILD_CHECK(cn->devices(&ndev) == ncclSuccess && ndev == 1);
              ncclNetProperties_v11_t cp{};
              CHILD_CHECK(cn->getProperties(0, &cp) == ncclSuccess);
              CHILD_CHECK(std::strcmp(cp.name, "fake0") != 0 && cp.ptrSupport == kPtrHost);
              CHILD_CHECK(cn->finalize(cctx) == ncclSuccess);
              // The fake has no v6 table: that version keeps Optcast's own TCP network.
              auto* v6 = Table<ncclNet_v6_t>("ncclNetPlugin_v6");
              CHILD_CHECK(v6->init(TestLogger) == ncclSuccess);
              CHILD_CHECK(v6->devices(&ndev) == ncclSuccess && ndev >= 1);
              CHILD_CHECK(Logged("has no ncclNetPlugin_v6"));
              return 0;
            }));
}

volatile sig_atomic_t g_sigterm = 0;
void RecordSigterm(int) { g_sigterm = 1; }

TEST(NetForwarding, LoadingTheOtherPluginLeavesTheProgramsSignalHandlers) {
  EXPECT_EQ(0, InChild([] {
              // The fake's constructor takes SIGTERM (fake_net_plugin.cc), as libinfinipath does.
              struct sigaction mine {};
              mine.sa_handler = RecordSigterm;
              sigemptyset(&mine.sa_mask);
              CHILD_CHECK(sigaction(SIGTERM, &mine, nullptr) == 0);
              setenv("OPTCAST_NET_PLUGIN", OPTCAST_FAKE_NET_PLUGIN_PATH, 1);
              auto* net = Table<ncclNet_v11_t>("ncclNetPlugin_v11");
              void* ctx = nullptr;
              CHILD_CHECK(InitV11(net, &ctx) == ncclSuccess);
              CHILD_CHECK(dlopen(OPTCAST_FAKE_NET_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD) != nullptr);
              struct sigaction now {};
              CHILD_CHECK(sigaction(SIGTERM, nullptr, &now) == 0);
              CHILD_CHECK(now.sa_handler == RecordSigterm);
              CHILD_CHECK(raise(SIGTERM) == 0);  // the fake's handler would exit with 99
              CHILD_CHECK(g_sigterm == 1);
              CHILD_CHECK(Logged("replaced the handlers of SIGTERM"));
              CHILD_CHECK(net->finalize(ctx) == ncclSuccess);
              return 0;
            }));
}

TEST(NetForwarding, MissingLibraryFallsBackToTcp) {
  EXPECT_EQ(0, InChild([] {
              setenv("OPTCAST_NET_PLUGIN", "does-not-exist", 1);
              auto* net = Table<ncclNet_v11_t>("ncclNetPlugin_v11");
              void* ctx = nullptr;
              CHILD_CHECK(InitV11(net, &ctx) == ncclSuccess);
              CHILD_CHECK(Logged("cannot load libnccl-net-does-not-exist.so"));
              ncclNetProperties_v11_t p{};
              CHILD_CHECK(net->getProperties(0, &p) == ncclSuccess && p.ptrSupport == kPtrHost);
              CHILD_CHECK(net->finalize(ctx) == ncclSuccess);
              return 0;
            }));
}

TEST(NetForwarding, NamingThisPluginFallsBackToTcp) {
  EXPECT_EQ(0, InChild([] {
              setenv("OPTCAST_NET_PLUGIN", OPTCAST_NCCL_PLUGIN_PATH, 1);
              auto* net = Table<ncclNet_v11_t>("ncclNetPlugin_v11");
              void* ctx = nullptr;
              CHILD_CHECK(InitV11(net, &ctx) == ncclSuccess);
              CHILD_CHECK(Logged("names this plugin"));
              CHILD_CHECK(net->finalize(ctx) == ncclSuccess);
              return 0;
            }));
}

TEST(NetForwarding, FailedInitFallsBackToTcp) {
  EXPECT_EQ(0, InChild([] {
              setenv("OPTCAST_NET_PLUGIN", OPTCAST_FAKE_NET_PLUGIN_PATH, 1);
              setenv("FAKE_NET_INIT_FAIL", "1", 1);
              auto* net = Table<ncclNet_v11_t>("ncclNetPlugin_v11");
              void* ctx = nullptr;
              CHILD_CHECK(InitV11(net, &ctx) == ncclSuccess);
              CHILD_CHECK(Logged("failed to initialize"));
              ncclNetProperties_v11_t p{};
              CHILD_CHECK(net->getProperties(0, &p) == ncclSuccess && std::strcmp(p.name, "fake0") != 0);
              CHILD_CHECK(net->finalize(ctx) == ncclSuccess);
              return 0;
            }));
}

}  // namespace
}  // namespace optcast::nccl::test
