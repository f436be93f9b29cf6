// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Progress of a long benchmark sweep on stderr: which algorithm and size is running, how far the
// sweep is and about how long is left. On a terminal one line is rewritten in place (at most
// twice a second); elsewhere one line is printed per finished size.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace optcast::tools {

class BenchProgress {
 public:
  // `sizes`: the sweep's message sizes; each is run by every algorithm in `algos`, `rounds` times
  // (warm-up, timed and check iterations together).
  BenchProgress(bool enabled, bool terminal, std::vector<std::string> algos, std::vector<uint64_t> sizes, int rounds);
  void StartSize(const std::string& algo, uint64_t bytes);
  // `done` rounds of the current size have finished.
  void Round(int done);
  void FinishSize();
  void Finish();

 private:
  void Print(bool final_line);

  using Clock = std::chrono::steady_clock;
  bool enabled_;
  bool terminal_;
  std::vector<std::string> algos_;
  std::vector<uint64_t> sizes_;
  int rounds_;
  uint64_t total_work_ = 0;  // bytes x rounds over the whole sweep
  uint64_t done_work_ = 0;
  int steps_done_ = 0;
  int steps_total_ = 0;
  std::string algo_;
  uint64_t bytes_ = 0;
  int round_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_print_{};
};

// "1m05s", "12s".
std::string FormatDuration(double seconds);

}  // namespace optcast::tools
