// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// ReduceLoad: the share of a core that reductions needed lately decides whether the server wakes
// a worker thread. Driven with made-up times, so the figures are exact.

#include "server/reduce_load.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

namespace optcast::server {
namespace {

using std::chrono::microseconds;
using Clock = ReduceLoad::Clock;

// A reduction of `spent_us` every `period_us`, for `duration_us`, starting at `t`; returns the end.
Clock::time_point Steady(ReduceLoad& load, Clock::time_point t, int spent_us, int period_us, int duration_us) {
  for (int elapsed = 0; elapsed < duration_us; elapsed += period_us) {
    t += microseconds(period_us);
    load.Add(microseconds(spent_us), t);
  }
  return t;
}

TEST(ReduceLoad, SettlesAtTheShareOfACoreThatReductionsTake) {
  ReduceLoad load(0.2);
  const Clock::time_point t0 = Clock::time_point() + std::chrono::seconds(1);
  // 5 us every 500 us (1%): a slow link's chunks, cheap to reduce.
  Clock::time_point t = Steady(load, t0, 5, 500, 200'000);
  EXPECT_NEAR(load.Share(t), 0.01, 0.002);
  EXPECT_FALSE(load.WorthWorkers(t));
  // 150 us every 300 us (50%): loopback's stream of chunks.
  t = Steady(load, t, 150, 300, 200'000);
  EXPECT_NEAR(load.Share(t), 0.5, 0.01);
  EXPECT_TRUE(load.WorthWorkers(t));
}

TEST(ReduceLoad, FadesOnceTheReductionsStop) {
  ReduceLoad load(0.2);
  const Clock::time_point t0 = Clock::time_point() + std::chrono::seconds(1);
  Clock::time_point t = Steady(load, t0, 150, 300, 200'000);
  ASSERT_TRUE(load.WorthWorkers(t));
  // One decay interval later the weight is down by e; three and it is below the threshold.
  EXPECT_NEAR(load.Share(t + ReduceLoad::kDecay), load.Share(t) / std::exp(1.0), 0.01);
  EXPECT_FALSE(load.WorthWorkers(t + 3 * ReduceLoad::kDecay));
}

TEST(ReduceLoad, ReachesTheThresholdWithinAFewMillisecondsOfAHeavyStream) {
  ReduceLoad load(0.2);
  const Clock::time_point t0 = Clock::time_point() + std::chrono::seconds(1);
  // Reductions back to back at full speed (100% of a core) from a standing start.
  Clock::time_point t = t0;
  int chunks = 0;
  while (!load.WorthWorkers(t)) {
    t = Steady(load, t, 100, 100, 100);
    ++chunks;
  }
  // -ln(1 - 0.2) of the decay interval: 4.5 ms.
  EXPECT_LE(chunks, 50);
  EXPECT_GE(chunks, 40);
}

TEST(ReduceLoad, AShareOfZeroAlwaysUsesTheWorkers) {
  ReduceLoad load(0);
  EXPECT_TRUE(load.WorthWorkers(Clock::now()));
}

TEST(ReduceLoad, ATimeBeforeTheLastReductionDoesNotDecay) {
  ReduceLoad load(0.2);
  const Clock::time_point t0 = Clock::time_point() + std::chrono::seconds(1);
  load.Add(microseconds(10'000), t0);
  // A worker's finish time may be taken before the loop's own last one: no growth, no negative age.
  load.Add(microseconds(0), t0 - microseconds(500));
  EXPECT_NEAR(load.Share(t0), 0.5, 1e-9);
  EXPECT_NEAR(load.Share(t0 - microseconds(500)), 0.5, 1e-9);
}

}  // namespace
}  // namespace optcast::server
