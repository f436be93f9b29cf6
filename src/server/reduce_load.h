// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// How much of a core this server's reductions have needed lately: the share of wall-clock time
// spent reducing, decayed over a few tens of milliseconds.
//
// Handing a chunk to a worker thread costs two wake-ups (the worker's, then the loop's for the
// result) and the context switches they cause. That pays only while reducing is a real part of
// the loop's time, as on loopback or a fast NIC, where the loop must keep receiving while the
// workers reduce. On a link of a few Gbit/s or less, reducing takes a percent or two of a core,
// and the wake-ups cost more than the reduction they move (docs/benchmarks.md, "Reducing on the
// loop when reducing is cheap").

#include <chrono>

namespace optcast::server {

class ReduceLoad {
 public:
  using Clock = std::chrono::steady_clock;

  // Time over which a reduction's weight fades (by e each such interval).
  static constexpr std::chrono::microseconds kDecay{20'000};

  // `offload_share`: the share of a core (0..1) from which reductions are worth a worker;
  // 0 makes every eligible reduction go to the workers.
  explicit ReduceLoad(double offload_share) : offload_share_(offload_share) {}

  // A reduction took `spent`, ending at `now` (on the loop or on a worker).
  void Add(Clock::duration spent, Clock::time_point now);
  // The share of a core reductions needed lately, as of `now`.
  double Share(Clock::time_point now) const;
  // Whether reductions needed at least the offload share lately.
  bool WorthWorkers(Clock::time_point now) const { return offload_share_ <= 0 || Share(now) >= offload_share_; }

 private:
  double offload_share_;
  double busy_us_ = 0;  // decayed microseconds of reduction, as of last_
  Clock::time_point last_{};
};

}  // namespace optcast::server
