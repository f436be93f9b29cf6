// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace optcast::tooltest {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string WriteSecretFile(const std::string& path) {
  std::ofstream(path) << "a-test-secret-of-more-than-thirty-two-bytes-0123456789\n";
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  return path;
}

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "optcast-tools-test-XXXXXX").string();
  char* p = ::mkdtemp(tmpl.data());
  path_ = p ? p : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

namespace {
std::atomic<int> g_seq{0};
}

Process::Process(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  const std::string base =
      (fs::temp_directory_path() / ("optcast-proc-" + std::to_string(::getpid()) + "-" + std::to_string(g_seq++)))
          .string();
  out_path_ = base + ".out";
  err_path_ = base + ".err";
  pid_ = ::fork();
  if (pid_ == 0) {
    const int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
  std::error_code ec;
  fs::remove(out_path_, ec);
  fs::remove(err_path_, ec);
}

int Process::Wait(std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (!reaped_) {
    const pid_t r = ::waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      break;
    }
    if (Clock::now() >= end) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
      reaped_ = true;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
}

void Process::Signal(int sig) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

bool Process::WaitForOutput(const std::string& text, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (out().find(text) != std::string::npos) return true;
    if (!reaped_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
    if (reaped_) return out().find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string Process::out() const { return ReadFile(out_path_); }
std::string Process::err() const { return ReadFile(err_path_); }

RunResult RunToEnd(const std::vector<std::string>& argv, std::chrono::milliseconds limit,
                   const std::vector<std::string>& env) {
  Process p(argv, env);
  RunResult r;
  r.code = p.Wait(limit);
  r.out = p.out();
  r.err = p.err();
  return r;
}

}  // namespace optcast::tooltest
