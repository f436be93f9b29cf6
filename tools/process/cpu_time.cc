// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/process/cpu_time.h"

#include <dirent.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace optcast::tools {

namespace {

// utime + stime from /proc/PID/stat, in seconds; 0 when the process has gone.
double StatCpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream in(text.substr(close_paren + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {  // fields 14 and 15 (1-based) of proc(5)
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

double SelfCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double ProcessCpuSeconds(pid_t pid) {
  // /proc/PID/stat counts in clock ticks (10 ms); each thread's schedstat has nanoseconds
  // of run time, which short benchmark steps need.
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return 0;
  double total = 0;
  bool read_any = false;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream f(tasks + "/" + entry->d_name + "/schedstat");
    unsigned long long run_ns = 0;
    if (f >> run_ns) {
      total += static_cast<double>(run_ns) * 1e-9;
      read_any = true;
    }
  }
  closedir(dir);
  // A kernel without schedstat (CONFIG_SCHED_INFO off) still has the ticks.
  return read_any ? total : StatCpuSeconds(pid);
}

double ProcessesCpuSeconds(const std::vector<pid_t>& pids) {
  double total = 0;
  for (pid_t pid : pids) total += ProcessCpuSeconds(pid);
  return total;
}

MachineCpu ReadMachineCpu() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  uint64_t v[10] = {};
  f >> cpu;
  for (auto& x : v) f >> x;
  MachineCpu s;
  for (auto x : v) s.total += x;
  s.total -= v[8] + v[9];          // guest time is already counted in user/nice
  s.busy = s.total - v[3] - v[4];  // minus idle and iowait
  s.softirq = v[6];
  return s;
}

double BusyFraction(const MachineCpu& a, const MachineCpu& b) {
  return b.total > a.total ? static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total) : 0.0;
}

}  // namespace optcast::tools
