// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/cpu_time.h"

#include <dirent.h>

#include <ctime>
#include <fstream>
#include <string>

namespace optcast::tools {

double SelfCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double ProcessesCpuSeconds(const std::vector<pid_t>& pids) {
  double total = 0;
  for (pid_t pid : pids) {
    // /proc/PID/stat counts in clock ticks (10 ms); each thread's schedstat has nanoseconds
    // of run time, which short benchmark steps need.
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    DIR* dir = opendir(tasks.c_str());
    if (dir == nullptr) continue;
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      std::ifstream f(tasks + "/" + entry->d_name + "/schedstat");
      unsigned long long run_ns = 0;
      if (f >> run_ns) total += static_cast<double>(run_ns) * 1e-9;
    }
    closedir(dir);
  }
  return total;
}

}  // namespace optcast::tools
