// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A CollNet AllReduce through the plugin, meant to run in a root filesystem that holds only the
// C/C++ runtime (run_rootfs_check.py builds one and runs this in it with chroot): the plugin must
// load there and reach the reduction servers (OPTCAST_SERVERS, outside the root filesystem) on
// its own. Every rank is a forked process that dlopens the plugin and drives it as NCCL's proxy
// does (tools/nccl_driver/proxy_collnet.h); the listen handles are all-gathered through the
// parent, as NCCL's bootstrap would. Results are checked against sums and maxima computed here.
//
//   rootfs_allreduce --plugin PATH --ranks N                  every rank AllReduces; exit 0 if right
//   rootfs_allreduce --plugin PATH --ranks N --expect-error T  every rank must fail, saying T
//
// This program itself needs only the C/C++ runtime, like the plugin (it links no Optcast code
// but the driver and optcast_test_support, static and without dependencies of their own).

#include <dlfcn.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/fd_io.h"
#include "tools/nccl_driver/plugin_log.h"
#include "tools/nccl_driver/proxy_collnet.h"

namespace optcast::nccl_rootfs {
namespace {

using Clock = std::chrono::steady_clock;
using testsupport::ReadAll;
using testsupport::WriteAll;
using tools::nccl_driver::ProxyCollNet;
constexpr size_t kHandle = nccl::kNetHandleMaxSize;
constexpr auto kLimit = std::chrono::seconds(90);  // for the whole run; every wait below is bounded by it

struct Options {
  std::string plugin;
  int ranks = 0;
  std::string expect_error;  // "": the AllReduces must succeed
};

// Values whose float sums are exact, so the check is bit for bit.
float SumInput(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1)); }
int32_t MaxInput(int rank, size_t i) {
  return static_cast<int32_t>((i * 7919 + static_cast<size_t>(rank) * 104729) % 100003) - 50000;
}

// One AllReduce of `count` elements, checked element by element.
bool CheckSum(ProxyCollNet& pc, int rank, int nranks, size_t count) {
  std::vector<float> send(count), recv(count, -1.0f);
  for (size_t i = 0; i < count; ++i) send[i] = SumInput(rank, i);
  void *ms = nullptr, *mr = nullptr;
  Status st = pc.Register(send.data(), count * sizeof(float), &ms);
  if (st.ok()) st = pc.Register(recv.data(), count * sizeof(float), &mr);
  if (st.ok()) st = pc.AllReduce(send.data(), recv.data(), count, DataType::kFloat32, RedOp::kSum, ms, mr);
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: float32 sum of %zu elements: %s\n", rank, count, st.ToString().c_str());
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < nranks; ++r) want += SumInput(r, i);
    if (recv[i] != want) {
      std::fprintf(stderr, "rank %d: float32 sum of %zu elements: element %zu is %g, want %g\n", rank, count, i,
                   recv[i], want);
      return false;
    }
  }
  return pc.Deregister(ms).ok() && pc.Deregister(mr).ok();
}

bool CheckMax(ProxyCollNet& pc, int rank, int nranks, size_t count) {
  std::vector<int32_t> send(count), recv(count, 0);
  for (size_t i = 0; i < count; ++i) send[i] = MaxInput(rank, i);
  void *ms = nullptr, *mr = nullptr;
  Status st = pc.Register(send.data(), count * sizeof(int32_t), &ms);
  if (st.ok()) st = pc.Register(recv.data(), count * sizeof(int32_t), &mr);
  if (st.ok()) st = pc.AllReduce(send.data(), recv.data(), count, DataType::kInt32, RedOp::kMax, ms, mr);
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: int32 max of %zu elements: %s\n", rank, count, st.ToString().c_str());
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    int32_t want = MaxInput(0, i);
    for (int r = 1; r < nranks; ++r) want = std::max(want, MaxInput(r, i));
    if (recv[i] != want) {
      std::fprintf(stderr, "rank %d: int32 max of %zu elements: element %zu is %d, want %d\n", rank, count, i, recv[i],
                   want);
      return false;
    }
  }
  return pc.Deregister(ms).ok() && pc.Deregister(mr).ok();
}

bool Logged(const std::string& needle) {
  for (const std::string& line : tools::nccl_driver::PluginLines()) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

// One rank, in its own process; `fd` leads to the parent, which all-gathers the handles.
int RunRank(const Options& o, int rank, int fd) {
  const auto deadline = Clock::now() + kLimit;
  // NCCL refuses a library that has no ncclNetPlugin table before it looks for CollNet.
  void* lib = dlopen(o.plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "rank %d: dlopen(%s): %s\n", rank, o.plugin.c_str(), dlerror());
    return 1;
  }
  if (dlsym(lib, "ncclNetPlugin_v11") == nullptr && dlsym(lib, "ncclNetPlugin_v10") == nullptr) {
    std::fprintf(stderr, "rank %d: %s has no ncclNetPlugin table; NCCL would refuse it\n", rank, o.plugin.c_str());
    return 1;
  }
  auto allgather = [&](const std::string& mine, std::vector<std::string>* all) -> Status {
    if (mine.size() != kHandle || !WriteAll(fd, mine.data(), kHandle)) return InternalError("handle exchange: send");
    std::string bytes(kHandle * static_cast<size_t>(o.ranks), '\0');
    if (!ReadAll(fd, bytes.data(), bytes.size(), deadline)) return TimeoutError("handle exchange: no reply");
    all->clear();
    for (int r = 0; r < o.ranks; ++r) all->push_back(bytes.substr(static_cast<size_t>(r) * kHandle, kHandle));
    return Status::Ok();
  };
  std::unique_ptr<ProxyCollNet> pc;
  Status st = ProxyCollNet::Create(o.plugin, rank, o.ranks, allgather, {}, &pc);

  if (!o.expect_error.empty()) {
    if (st.ok()) {
      std::fprintf(stderr, "rank %d: connected, but an error saying '%s' was expected\n", rank, o.expect_error.c_str());
      return 1;
    }
    if (st.message().find(o.expect_error) == std::string::npos && !Logged(o.expect_error)) {
      std::fprintf(stderr, "rank %d: failed as expected, but neither the error nor the plugin said '%s': %s\n", rank,
                   o.expect_error.c_str(), st.ToString().c_str());
      return 1;
    }
    std::printf("rank %d: failed as expected: %s\n", rank, st.ToString().c_str());
    return 0;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
    return 1;
  }
  // Sizes below one step, several steps with a ragged end, and NCCL's multi-channel pipelining.
  for (size_t count : {size_t{1}, size_t{4099}, size_t{3 * 131072 + 5}}) {
    if (!CheckSum(*pc, rank, o.ranks, count)) return 1;
  }
  if (!CheckMax(*pc, rank, o.ranks, 70001)) return 1;
  if (!Logged("CollNet active")) {
    std::fprintf(stderr, "rank %d: the plugin never logged 'CollNet active' (run with NCCL_DEBUG=INFO)\n", rank);
    return 1;
  }
  std::printf("rank %d: 4 AllReduces right through %s\n", rank, pc->Describe().c_str());
  return 0;
}

int Run(const Options& o) {
  struct Rank {
    pid_t pid = -1;
    int fd = -1;
  };
  std::vector<Rank> ranks;
  const pid_t parent = ::getpid();
  for (int r = 0; r < o.ranks; ++r) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      std::perror("socketpair");
      return 1;
    }
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) std::_Exit(9);
      ::close(sv[0]);
      const int code = RunRank(o, r, sv[1]);
      std::fflush(nullptr);
      std::_Exit(code);
    }
    ::close(sv[1]);
    ranks.push_back({pid, sv[0]});
  }

  // NCCL's bootstrap: every rank's handle, then all of them to every rank.
  const auto deadline = Clock::now() + kLimit;
  std::string all(kHandle * ranks.size(), '\0');
  bool exchanged = true;
  for (size_t r = 0; r < ranks.size() && exchanged; ++r) {
    exchanged = ReadAll(ranks[r].fd, &all[r * kHandle], kHandle, deadline);
  }
  for (size_t r = 0; r < ranks.size() && exchanged; ++r) exchanged = WriteAll(ranks[r].fd, all.data(), all.size());
  // Without the exchange (a rank failed before its listen handle), the others fail on the closed
  // descriptor rather than wait.
  for (Rank& rk : ranks) ::close(rk.fd);

  int failed = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    int status = 0;
    for (;;) {
      const pid_t w = ::waitpid(ranks[r].pid, &status, WNOHANG);
      if (w == ranks[r].pid) break;
      if (Clock::now() > deadline) {
        std::fprintf(stderr, "rank %zu: still running after %lld s; killed\n", r,
                     static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kLimit).count()));
        ::kill(ranks[r].pid, SIGKILL);
        ::waitpid(ranks[r].pid, &status, 0);
        break;
      }
      ::usleep(20000);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed > 0) {
    std::fprintf(stderr, "%d of %d rank(s) failed\n", failed, o.ranks);
    return 1;
  }
  std::printf("all %d ranks: %s\n", o.ranks, o.expect_error.empty() ? "ok" : "failed as expected");
  return 0;
}

}  // namespace
}  // namespace optcast::nccl_rootfs

int main(int argc, char** argv) {
  optcast::nccl_rootfs::Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--plugin") {
      o.plugin = argv[i + 1];
    } else if (flag == "--ranks") {
      o.ranks = std::atoi(argv[i + 1]);
    } else if (flag == "--expect-error") {
      o.expect_error = argv[i + 1];
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (o.plugin.empty() || o.ranks < 1) {
    std::fprintf(stderr, "usage: %s --plugin PATH --ranks N [--expect-error TEXT]\n", argv[0]);
    return 2;
  }
  return optcast::nccl_rootfs::Run(o);
}
