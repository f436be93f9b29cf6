// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Child processes for the tools: commands run to completion with their output captured (ip, tc),
// programs started with their output in a log file (servers and ranks of the emulated cluster),
// functions run in a forked child (the ranks of `optcast bench`), and one way to wait for a set
// of them with a time limit. The product itself (server, client, plugin) never forks.

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "optcast/status.h"

namespace optcast::tools {

// ---- commands run to completion

struct CommandResult {
  int exit_code = -1;  // -1: could not start, or killed by a signal
  std::string out;
  std::string err;
};

// Runs argv[0] (FindExecutable) to completion, capturing stdout and stderr; stdin is /dev/null.
CommandResult RunCommand(const std::vector<std::string>& argv);

// Runs argv and turns a non-zero exit into an error naming the command and quoting its stderr, so
// that a failed `ip link add` says exactly what the kernel refused.
Status RunChecked(const std::vector<std::string>& argv);
// Same, and hands back stdout.
Status RunChecked(const std::vector<std::string>& argv, std::string* out);

// "ip -n x link add ..." for messages.
std::string JoinCommand(const std::vector<std::string>& argv);

// Whether `name` is an executable in PATH.
bool InPath(const std::string& name);

// Where `name` is: itself if it is in PATH (or is a path), else the first of /usr/sbin, /sbin,
// /usr/bin, /bin that holds it (ip and tc live in /usr/sbin, which is not in every user's PATH;
// sudo adds it). `name` unchanged when it is nowhere.
std::string FindExecutable(const std::string& name);

// ---- children that run beside the caller

struct SpawnOptions {
  // Where the child's stdout and stderr go: this file, created or truncated. Empty: inherited.
  std::string output_file;
  // Killed (SIGKILL) when the caller dies; this survives exec.
  bool die_with_parent = true;
  // Leaves Ctrl-C to the caller, which then stops its children in order.
  bool ignore_sigint = false;
};

// Starts argv[0] (FindExecutable) with arguments argv. Returns once the child is forked; a program
// that cannot be run exits with 127 after saying why on its stderr.
Status Spawn(const std::vector<std::string>& argv, const SpawnOptions& options, pid_t* pid);

// Forks a child that runs body() and exits with what it returns, flushing stdout before the fork
// (so that nothing buffered is printed twice) and before the exit. The child dies with the caller.
Status ForkCall(const std::function<int()>& body, pid_t* pid);

// One child being waited for.
struct Child {
  pid_t pid = -1;
  bool done = false;       // reaped (or killed and reaped after the wait ended early)
  int status = 0;          // as waitpid reports it, once reaped by the wait
  double cpu_seconds = 0;  // its user + system time, once reaped by the wait
  // Exited normally with 0.
  bool Succeeded() const;
  // "exited with 3", "was killed by signal 9".
  std::string HowItEnded() const;
};

struct WaitOptions {
  std::chrono::milliseconds limit{0};                       // the wait gives up after this long
  std::chrono::milliseconds poll_interval{20};              // how often the children are looked at
  bool stop_at_first_failure = false;                       // a child that fails ends the wait
  const volatile std::sig_atomic_t* interrupted = nullptr;  // when set and nonzero, ends the wait
};

enum class WaitEnd {
  kAllDone,      // every child has exited (some may have failed)
  kFailed,       // stop_at_first_failure: *failed is the child that failed
  kTimedOut,     // the limit passed
  kInterrupted,  // *interrupted was set
};

// Reaps `children` as they exit until all have. A wait that ends early (kFailed, kTimedOut,
// kInterrupted) kills (SIGKILL) and reaps the children still running, marking them done.
// Children are passed by pointer so that callers may keep them in records of their own.
WaitEnd WaitChildren(const std::vector<Child*>& children, const WaitOptions& options, size_t* failed = nullptr);

// Sends SIGKILL to every child not yet done and reaps it.
void KillChildren(const std::vector<Child*>& children);

}  // namespace optcast::tools
