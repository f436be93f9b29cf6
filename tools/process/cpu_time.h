// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// CPU time as Linux accounts it (/proc): of this process, of other processes, of the machine.

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace optcast::tools {

// CPU time (user + system, every thread) this process has used, in seconds.
double SelfCpuSeconds();

// CPU time of every thread of a process, in seconds: from each thread's schedstat (nanoseconds,
// which short benchmark steps need), else from /proc/PID/stat (clock ticks, 10 ms). A process
// that has gone counts as zero.
double ProcessCpuSeconds(pid_t pid);
// The same for several processes together.
double ProcessesCpuSeconds(const std::vector<pid_t>& pids);

// The whole machine's CPU time so far, from the first line of /proc/stat (clock ticks).
struct MachineCpu {
  uint64_t busy = 0;
  uint64_t total = 0;
  uint64_t softirq = 0;  // where veth, bridge and HTB forwarding is accounted
};
MachineCpu ReadMachineCpu();
// The fraction of the machine's CPU time that was busy between two samples.
double BusyFraction(const MachineCpu& before, const MachineCpu& after);

}  // namespace optcast::tools
