// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Prometheus-style metrics: counters, gauges and histograms that any thread may update without a
// lock, collected in a registry that renders the text exposition format (version 0.0.4).

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace optcast::observe {

// label name -> value, e.g. {{"type", "allreduce"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t d) { value_.fetch_add(d, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Cumulative buckets with upper bounds `bounds` (ascending) plus +Inf.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  const std::vector<double>& bounds() const { return bounds_; }
  // Observations <= bounds()[i] (cumulative), i in [0, bounds().size()]; the last is the count.
  uint64_t cumulative(size_t i) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative; last = +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Bounds start, start*factor, ... (n of them): the usual shape for latencies.
std::vector<double> ExponentialBounds(double start, double factor, int n);

// Owns metrics and renders them. Registration takes a lock and returns a reference that stays
// valid for the registry's life; updates to the metric itself take none.
class Registry {
 public:
  Counter& AddCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& AddGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& AddHistogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                          const Labels& labels = {});

  // The text exposition format: # HELP, # TYPE, then one line per series, families in name order.
  std::string Render() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    Counter* counter = nullptr;
    Gauge* gauge = nullptr;
    Histogram* histogram = nullptr;
  };
  struct Family {
    Kind kind;
    std::string help;
    std::vector<Series> series;
  };
  Family& FamilyFor(const std::string& name, const std::string& help, Kind kind, const Labels& labels);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::deque<Counter> counters_;
  std::deque<Gauge> gauges_;
  std::deque<Histogram> histograms_;
};

}  // namespace optcast::observe
