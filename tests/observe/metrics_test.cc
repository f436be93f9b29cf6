// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The metrics registry: the text exposition it renders, histogram buckets, updates from threads.

#include "observe/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace optcast::observe {
namespace {

TEST(Metrics, RendersTheTextExpositionFormat) {
  Registry r;
  r.AddCounter("zz_bytes_total", "Bytes moved").Inc(1234);
  r.AddCounter("aa_ops_total", "Ops, by type", {{"type", "allreduce"}}).Inc(3);
  r.AddCounter("aa_ops_total", "Ops, by type", {{"type", "allgather"}}).Inc();
  r.AddGauge("mm_queue", "Queue \\ depth\nnow").Set(-2);
  Histogram& h = r.AddHistogram("hh_seconds", "Latency", {0.125, 0.5, 2}, {{"job", "a\"b"}});
  h.Observe(0.0625);
  h.Observe(0.125);  // le is inclusive: lands in the first bucket
  h.Observe(1);
  h.Observe(4);
  // Written out by hand from the format's specification: families in name order, HELP and TYPE
  // first, series in registration order, cumulative buckets ending with +Inf == _count.
  const std::string want =
      "# HELP aa_ops_total Ops, by type\n"
      "# TYPE aa_ops_total counter\n"
      "aa_ops_total{type=\"allreduce\"} 3\n"
      "aa_ops_total{type=\"allgather\"} 1\n"
      "# HELP hh_seconds Latency\n"
      "# TYPE hh_seconds histogram\n"
      "hh_seconds_bucket{job=\"a\\\"b\",le=\"0.125\"} 2\n"
      "hh_seconds_bucket{job=\"a\\\"b\",le=\"0.5\"} 2\n"
      "hh_seconds_bucket{job=\"a\\\"b\",le=\"2\"} 3\n"
      "hh_seconds_bucket{job=\"a\\\"b\",le=\"+Inf\"} 4\n"
      "hh_seconds_sum{job=\"a\\\"b\"} 5.1875\n"
      "hh_seconds_count{job=\"a\\\"b\"} 4\n"
      "# HELP mm_queue Queue \\\\ depth\\nnow\n"
      "# TYPE mm_queue gauge\n"
      "mm_queue -2\n"
      "# HELP zz_bytes_total Bytes moved\n"
      "# TYPE zz_bytes_total counter\n"
      "zz_bytes_total 1234\n";
  EXPECT_EQ(r.Render(), want);
}

TEST(Metrics, RegisteringTheSameSeriesTwiceReturnsIt) {
  Registry r;
  Counter& a = r.AddCounter("x_total", "X", {{"k", "v"}});
  Counter& b = r.AddCounter("x_total", "X", {{"k", "v"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &r.AddCounter("x_total", "X", {{"k", "w"}}));
}

TEST(Metrics, ExponentialBounds) { EXPECT_EQ(ExponentialBounds(1, 2, 4), (std::vector<double>{1, 2, 4, 8})); }

TEST(Metrics, ThreadsUpdateWithoutLosingCounts) {
  Registry r;
  Counter& c = r.AddCounter("c_total", "C");
  Histogram& h = r.AddHistogram("h", "H", {0.5});
  constexpr int kThreads = 4, kEach = 100000;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        c.Inc();
        h.Observe(t % 2 ? 1.0 : 0.25);
      }
    });
  }
  // Rendering while others write must not crash or tear (checked under TSan in the sanitizer runs).
  for (int i = 0; i < 20; ++i) (void)r.Render();
  for (auto& t : ts) t.join();
  EXPECT_EQ(c.value(), uint64_t{kThreads} * kEach);
  EXPECT_EQ(h.count(), uint64_t{kThreads} * kEach);
  EXPECT_EQ(h.cumulative(0), uint64_t{kThreads / 2} * kEach);
  EXPECT_DOUBLE_EQ(h.sum(), kEach * (2 * 1.0 + 2 * 0.25));
}

}  // namespace
}  // namespace optcast::observe
