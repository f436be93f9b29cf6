// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <thread>

namespace optcast::daemon {

using Clock = std::chrono::steady_clock;

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

Status ServerProcess::Start(const std::vector<std::string>& args, const std::vector<std::string>& env,
                            std::chrono::milliseconds limit) {
  const std::string bin = OptcastBinary();
  if (bin.empty()) return InvalidArgument("OPTCAST_BIN is not set; run the test through ctest");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return InternalError("pipe failed");
  std::vector<std::string> argv = {bin, "server"};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid < 0) return InternalError("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    ::execv(bin.c_str(), cargv.data());
    _exit(127);
  }
  ::close(fds[1]);
  pid_ = pid;
  out_fd_ = fds[0];
  const std::regex listening("optcast server listening on [^ ]*:([0-9]+)[^\n]*\n");
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    Drain(20);
    std::smatch m;
    if (std::regex_search(output_, m, listening)) {
      port_ = static_cast<uint16_t>(std::stoi(m[1].str()));
      return Status::Ok();
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      Drain(0);
      return UnavailableError("optcast server exited (status " + std::to_string(status) + "): " + output_);
    }
  }
  return TimeoutError("optcast server did not say it listens: " + output_);
}

void ServerProcess::Drain(int timeout_ms) {
  if (out_fd_ < 0) return;
  pollfd p{out_fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out_fd_, buf, sizeof(buf));
    if (n <= 0) return;
    output_.append(buf, static_cast<size_t>(n));
    pollfd q{out_fd_, POLLIN, 0};
    if (::poll(&q, 1, 0) <= 0) return;
  }
}

std::string ServerProcess::Output() {
  Drain(0);
  return output_;
}

void ServerProcess::Signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

bool ServerProcess::Wait(std::chrono::milliseconds limit, int* exit_code) {
  const auto deadline = Clock::now() + limit;
  while (pid_ > 0) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      Drain(50);
      return true;
    }
    if (Clock::now() >= deadline) return false;
    Drain(10);
  }
  return false;
}

uint64_t ServerProcess::RssBytes() const {
  std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

int ServerProcess::OpenFds() const {
  DIR* d = ::opendir(("/proc/" + std::to_string(pid_) + "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

}  // namespace optcast::daemon
