// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Runs the real `optcast` binary as a child process with its output in files, with every wait
// bounded.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace optcast::tooltest {

class Process {
 public:
  // Starts argv with extra environment entries ("NAME=value"); stdout and stderr go to files.
  Process(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
  ~Process();  // kills and reaps the child if it still runs

  // Waits up to `limit` for the child to exit; returns its exit code, or -1 (killed after the
  // limit, or ended by a signal).
  int Wait(std::chrono::milliseconds limit);
  void Signal(int sig);
  // Polls stdout until it contains `text` (true) or `limit` passes (false).
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds limit);
  std::string out() const;
  std::string err() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string out_path_, err_path_;
};

// Runs argv to completion (bounded by `limit`): exit code, with stdout and stderr.
struct RunResult {
  int code = -1;
  std::string out, err;
};
RunResult RunToEnd(const std::vector<std::string>& argv, std::chrono::milliseconds limit,
                   const std::vector<std::string>& env = {});

std::string ReadFile(const std::string& path);
// Writes a deployment secret (mode 600) into `path` for servers that need one; returns the path.
std::string WriteSecretFile(const std::string& path);

// A fresh directory under the system's temporary directory, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace optcast::tooltest
