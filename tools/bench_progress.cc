// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/bench_progress.h"

#include <fmt/format.h>

#include <cstdio>

#include "tools/plot/line_plot.h"

namespace optcast::tools {

std::string FormatDuration(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

BenchProgress::BenchProgress(bool enabled, bool terminal, std::vector<std::string> algos, std::vector<uint64_t> sizes,
                             int rounds)
    : enabled_(enabled), terminal_(terminal), algos_(std::move(algos)), sizes_(std::move(sizes)), rounds_(rounds) {
  // Time grows with bytes once sizes are large, which is where a sweep spends it; a fixed cost per
  // round keeps the many small sizes from counting as nothing.
  for (uint64_t b : sizes_) total_work_ += (b + 65536) * static_cast<uint64_t>(rounds_);
  total_work_ *= algos_.size();
  steps_total_ = static_cast<int>(sizes_.size() * algos_.size());
}

void BenchProgress::StartSize(const std::string& algo, uint64_t bytes) {
  algo_ = algo;
  bytes_ = bytes;
  round_ = 0;
  if (enabled_ && terminal_) Print(false);
}

void BenchProgress::Round(int done) {
  round_ = done;
  if (!enabled_ || !terminal_) return;
  if (Clock::now() - last_print_ < std::chrono::milliseconds(500)) return;
  Print(false);
}

void BenchProgress::FinishSize() {
  done_work_ += (bytes_ + 65536) * static_cast<uint64_t>(rounds_);
  ++steps_done_;
  round_ = 0;
  if (!enabled_) return;
  if (terminal_) {
    // The table row for this size goes to stdout next: clear the line it would land on.
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  } else {
    Print(true);
  }
}

void BenchProgress::Finish() {
  if (enabled_ && terminal_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

void BenchProgress::Print(bool final_line) {
  last_print_ = Clock::now();
  const double elapsed = std::chrono::duration<double>(last_print_ - start_).count();
  const double work = static_cast<double>(done_work_) + static_cast<double>(round_) * (bytes_ + 65536);
  const double frac = total_work_ ? std::min(1.0, work / static_cast<double>(total_work_)) : 1.0;
  const std::string left = frac > 0.01 ? "~" + FormatDuration(elapsed * (1 - frac) / frac) + " left" : "";
  std::string line;
  if (final_line) {
    line = fmt::format("# progress: {} {} done ({}/{} sizes), {:3.0f}%, {} elapsed{}{}", algo_, SizeLabel(bytes_),
                       steps_done_, steps_total_, 100 * frac, FormatDuration(elapsed), left.empty() ? "" : ", ", left);
    std::fprintf(stderr, "%s\n", line.c_str());
  } else {
    line = fmt::format("[{:3.0f}%] {} {} ({}/{}), round {}/{}, {} elapsed{}{}", 100 * frac, algo_, SizeLabel(bytes_),
                       steps_done_ + 1 > steps_total_ ? steps_total_ : steps_done_ + 1, steps_total_, round_, rounds_,
                       FormatDuration(elapsed), left.empty() ? "" : ", ", left);
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace optcast::tools
