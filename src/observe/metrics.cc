// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "observe/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace optcast::observe {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  std::sort(bounds_.begin(), bounds_.end());
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  // A bucket holds observations <= its bound, as Prometheus defines "le".
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t total = 0;
  for (size_t b = 0; b <= i && b <= bounds_.size(); ++b) total += buckets_[b].load(std::memory_order_relaxed);
  return total;
}

std::vector<double> ExponentialBounds(double start, double factor, int n) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < n; ++i, v *= factor) out.push_back(v);
  return out;
}

namespace {

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} with `extra` (e.g. le="0.5") appended; "" when there are no labels at all.
std::string FormatLabels(const Labels& labels, const std::string& extra = "") {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
  }
  if (!extra.empty()) {
    if (!labels.empty()) out += ',';
    out += extra;
  }
  return out + "}";
}

std::string FormatDouble(double v) { return fmt::format("{}", v); }

}  // namespace

Registry::Family& Registry::FamilyFor(const std::string& name, const std::string& help, Kind kind,
                                      const Labels& labels) {
  auto [it, created] = families_.try_emplace(name);
  Family& f = it->second;
  if (created) {
    f.kind = kind;
    f.help = help;
  } else if (f.kind != kind) {
    // A programming error: one name registered as two kinds would render an invalid exposition.
    std::fprintf(stderr, "optcast: metric %s registered twice with different types\n", name.c_str());
    std::abort();
  }
  return f;
}

Counter& Registry::AddCounter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = FamilyFor(name, help, Kind::kCounter, labels);
  for (auto& s : f.series) {
    if (s.labels == labels) return *s.counter;
  }
  Counter& c = counters_.emplace_back();
  f.series.push_back({labels, &c, nullptr, nullptr});
  return c;
}

Gauge& Registry::AddGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = FamilyFor(name, help, Kind::kGauge, labels);
  for (auto& s : f.series) {
    if (s.labels == labels) return *s.gauge;
  }
  Gauge& g = gauges_.emplace_back();
  f.series.push_back({labels, nullptr, &g, nullptr});
  return g;
}

Histogram& Registry::AddHistogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                                  const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = FamilyFor(name, help, Kind::kHistogram, labels);
  for (auto& s : f.series) {
    if (s.labels == labels) return *s.histogram;
  }
  Histogram& h = histograms_.emplace_back(std::move(bounds));
  f.series.push_back({labels, nullptr, nullptr, &h});
  return h;
}

std::string Registry::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    const char* type = f.kind == Kind::kCounter ? "counter" : f.kind == Kind::kGauge ? "gauge" : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, EscapeHelp(f.help), name, type);
    for (const Series& s : f.series) {
      if (s.counter) {
        out += fmt::format("{}{} {}\n", name, FormatLabels(s.labels), s.counter->value());
      } else if (s.gauge) {
        out += fmt::format("{}{} {}\n", name, FormatLabels(s.labels), s.gauge->value());
      } else {
        const Histogram& h = *s.histogram;
        // Read the buckets once so that the cumulative counts never decrease within one scrape.
        uint64_t running = 0;
        for (size_t i = 0; i <= h.bounds().size(); ++i) {
          running = std::max(running, h.cumulative(i));
          const std::string le = i < h.bounds().size() ? FormatDouble(h.bounds()[i]) : "+Inf";
          out += fmt::format("{}_bucket{} {}\n", name, FormatLabels(s.labels, "le=\"" + le + "\""), running);
        }
        out += fmt::format("{}_sum{} {}\n", name, FormatLabels(s.labels), FormatDouble(h.sum()));
        out += fmt::format("{}_count{} {}\n", name, FormatLabels(s.labels),
                           running);  // equals the +Inf bucket, as the format requires
      }
    }
  }
  return out;
}

}  // namespace optcast::observe
