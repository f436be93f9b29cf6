// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "common/signal_dispositions.h"

namespace optcast {

namespace {

bool TakesSiginfo(const struct sigaction& sa) { return (sa.sa_flags & SA_SIGINFO) != 0; }

bool SameHandler(const struct sigaction& a, const struct sigaction& b) {
  if (TakesSiginfo(a) != TakesSiginfo(b)) return false;
  return TakesSiginfo(a) ? a.sa_sigaction == b.sa_sigaction : a.sa_handler == b.sa_handler;
}

// Not sigabbrev_np: it needs glibc 2.32, and the NCCL plugin is loaded into older images too.
std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGCHLD: return "SIGCHLD";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace

SignalDispositionGuard::SignalDispositionGuard() {
  for (int sig = 1; sig < kStandardSignals; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    valid_[sig] = sigaction(sig, nullptr, &saved_[sig]) == 0;
  }
}

SignalDispositionGuard::~SignalDispositionGuard() {
  if (!restored_) Restore();
}

std::string SignalDispositionGuard::Restore() {
  restored_ = true;
  std::string changed;
  for (int sig = 1; sig < kStandardSignals; ++sig) {
    if (!valid_[sig]) continue;
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) != 0 || SameHandler(now, saved_[sig])) continue;
    if (sigaction(sig, &saved_[sig], nullptr) != 0) continue;
    changed += (changed.empty() ? "" : ", ") + SignalName(sig);
  }
  return changed;
}

}  // namespace optcast
