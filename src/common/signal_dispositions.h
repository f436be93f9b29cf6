// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <signal.h>

#include <array>
#include <string>

namespace optcast {

// Keeps the process's signal handlers as they were across a call that may run other libraries'
// constructors: loading libfabric.so.1, fi_getinfo and fi_fabric (the ofi transport), and loading
// the network plugin the NCCL plugin forwards point-to-point to (aws-ofi-nccl links libfabric).
// Why: Debian's libfabric.so.1 links libinfinipath (PSM), whose constructor replaces the handlers
// of SIGINT, SIGTERM, SIGABRT, SIGILL, SIGSEGV and SIGBUS with one that prints a backtrace and
// calls exit() inside the handler. Optcast runs inside other people's programs (the NCCL plugin
// in a training job): Python's SIGINT raises KeyboardInterrupt, launchers stop workers with
// SIGTERM, crash handlers write reports, and exit() from a handler may deadlock in atexit
// destructors. So whatever changed a standard signal's disposition in the guarded span is put
// back, SIG_IGN and SIG_DFL included: the program's dispositions are the program's to choose.
//
// Real-time signals are left alone (glibc and threading libraries use them internally). A handler
// that another thread of the program installs during the guarded span is indistinguishable from a
// library's and is undone too; the spans are library loads, once per process.
class SignalDispositionGuard {
 public:
  SignalDispositionGuard();
  ~SignalDispositionGuard();
  SignalDispositionGuard(const SignalDispositionGuard&) = delete;
  SignalDispositionGuard& operator=(const SignalDispositionGuard&) = delete;

  // Puts back every handler that changed since construction (the destructor does it too) and
  // returns their names ("SIGINT, SIGTERM"), "" when none changed.
  std::string Restore();

 private:
  static constexpr int kStandardSignals = 32;  // 1..31 on Linux
  std::array<struct sigaction, kStandardSignals> saved_{};
  std::array<bool, kStandardSignals> valid_{};
  bool restored_ = false;
};

}  // namespace optcast
