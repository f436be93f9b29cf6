// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/local_cluster.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "server/server.h"
#include "tools/process/subprocess.h"

namespace optcast::tools {

LocalCluster::~LocalCluster() { StopServers(); }

Status LocalCluster::StartServers(int count, const std::string& host, std::vector<std::string>* addresses,
                                  transport::Kind transport, int io_threads, int reduce_threads) {
  addresses->clear();
  for (int i = 0; i < count; ++i) {
    int fds[2];
    if (pipe(fds) != 0) return InternalError("pipe failed");
    pid_t pid = -1;
    Status forked = ForkCall(
        [&] {
          close(fds[0]);
          server::ServerOptions opts;
          opts.listen = {host, 0};
          opts.transport.kind = transport;
          opts.io_threads = io_threads;
          opts.reduce_threads = reduce_threads;
          server::Server srv(opts);
          Status st = srv.Start();
          uint32_t port = st.ok() ? srv.port() : 0;
          if (write(fds[1], &port, sizeof(port)) != sizeof(port)) return 3;
          close(fds[1]);
          if (!st.ok()) {
            std::fprintf(stderr, "optcast: server failed to start: %s\n", st.ToString().c_str());
            return 2;
          }
          signal(SIGTERM, SIG_DFL);
          st = srv.Run();
          return st.ok() ? 0 : 1;
        },
        &pid);
    if (!forked.ok()) {
      close(fds[0]);
      close(fds[1]);
      return forked;
    }
    close(fds[1]);
    servers_.push_back(pid);
    uint32_t port = 0;
    ssize_t n = read(fds[0], &port, sizeof(port));
    close(fds[0]);
    if (n != sizeof(port) || port == 0) return UnavailableError("a local server failed to start");
    addresses->push_back(host + ":" + std::to_string(port));
  }
  return Status::Ok();
}

Status LocalCluster::RunRanks(int nranks, const std::function<int(int)>& body, std::chrono::seconds limit) {
  std::vector<Child> ranks(nranks);
  std::vector<Child*> children;
  for (int r = 0; r < nranks; ++r) {
    OPTCAST_RETURN_IF_ERROR(ForkCall([&body, r] { return body(r); }, &ranks[r].pid));
    children.push_back(&ranks[r]);
  }
  WaitOptions wait;
  wait.limit = limit;
  wait.poll_interval = std::chrono::milliseconds(5);
  if (WaitChildren(children, wait) == WaitEnd::kTimedOut) {
    return TimeoutError("the rank processes did not finish within " + std::to_string(limit.count()) + " s");
  }
  int failed = 0;
  for (const Child& c : ranks) failed += c.Succeeded() ? 0 : 1;
  if (failed > 0) return InternalError(std::to_string(failed) + " rank process(es) failed");
  return Status::Ok();
}

std::vector<uint64_t> LocalCluster::ServerPeakRss() const {
  std::vector<uint64_t> out;
  for (pid_t pid : servers_) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    uint64_t kb = 0;
    while (std::getline(f, line)) {
      if (line.rfind("VmHWM:", 0) == 0) kb = std::stoull(line.substr(6));
    }
    out.push_back(kb * 1024);
  }
  return out;
}

void LocalCluster::StopServers() {
  for (pid_t pid : servers_) kill(pid, SIGTERM);
  for (pid_t pid : servers_) waitpid(pid, nullptr, 0);
  servers_.clear();
}

}  // namespace optcast::tools
