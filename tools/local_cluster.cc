// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/local_cluster.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "server/server.h"

namespace optcast::tools {

LocalCluster::~LocalCluster() { StopServers(); }

Status LocalCluster::StartServers(int count, const std::string& host, std::vector<std::string>* addresses,
                                  transport::Kind transport) {
  addresses->clear();
  for (int i = 0; i < count; ++i) {
    int fds[2];
    if (pipe(fds) != 0) return InternalError("pipe failed");
    pid_t pid = fork();
    if (pid < 0) return InternalError("fork failed");
    if (pid == 0) {
      close(fds[0]);
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
      server::ServerOptions opts;
      opts.listen = {host, 0};
      opts.transport = transport;
      server::Server srv(opts);
      Status st = srv.Start();
      uint32_t port = st.ok() ? srv.port() : 0;
      if (write(fds[1], &port, sizeof(port)) != sizeof(port)) _exit(3);
      close(fds[1]);
      if (!st.ok()) {
        std::fprintf(stderr, "optcast: server failed to start: %s\n", st.ToString().c_str());
        _exit(2);
      }
      signal(SIGTERM, SIG_DFL);
      st = srv.Run();
      _exit(st.ok() ? 0 : 1);
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
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return InternalError("fork failed");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int rc = body(r);
      std::fflush(stdout);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int failed = 0;
  size_t alive = pids.size();
  std::vector<bool> done(pids.size(), false);
  while (alive > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r == pids[i]) {
        done[i] = true;
        --alive;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
      }
    }
    if (alive == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) kill(pids[i], SIGKILL);
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) waitpid(pids[i], nullptr, 0);
      return TimeoutError("the rank processes did not finish within " + std::to_string(limit.count()) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
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
