// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Timeline traces in the Chrome trace-event JSON format (opens in Perfetto and chrome://tracing).
//
// One trace file per process. Every call site tests TraceOn() first, a relaxed load of one
// atomic flag, so that tracing off costs nothing measurable. When on, events are formatted into a
// buffer per thread and appended to the file in blocks; the file is valid JSON after every
// FlushTrace(), so a process that ends without StopTrace() still leaves a readable trace. Every
// thread's events are flushed at least every kTraceFlushInterval while events keep coming (and
// by MaybeFlushTrace() when they stop), so a running or crashed process leaves a trace that is
// at most about a second behind.
// Timestamps are CLOCK_MONOTONIC microseconds, shared by every process of a host, so the traces
// of a server and its clients on one machine line up.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "optcast/status.h"

namespace optcast::observe {

inline std::atomic<bool> g_trace_on{false};
inline bool TraceOn() { return g_trace_on.load(std::memory_order_relaxed); }

// Microseconds since an arbitrary point, on the clock shared by the host's processes.
double TraceNowUs();

// The "args" object of an event, built only when tracing is on.
class TraceArgs {
 public:
  TraceArgs& Add(std::string_view key, int64_t v);
  TraceArgs& Add(std::string_view key, uint64_t v);
  TraceArgs& Add(std::string_view key, int v) { return Add(key, static_cast<int64_t>(v)); }
  TraceArgs& Add(std::string_view key, unsigned v) { return Add(key, static_cast<uint64_t>(v)); }
  TraceArgs& Add(std::string_view key, double v);
  TraceArgs& Add(std::string_view key, std::string_view v);
  TraceArgs& Add(std::string_view key, const char* v) { return Add(key, std::string_view(v)); }
  const std::string& fields() const { return fields_; }  // "k":v,... without braces

 private:
  void Key(std::string_view key);
  std::string fields_;
};

// Starts writing `path` (truncated); `process_name` labels this process's tracks. Fails if a trace
// is already being written or the file cannot be created.
Status StartTrace(const std::string& path, const std::string& process_name);
// Starts a trace at the path in environment variable `var`, if it is set and no trace is open.
// "%p" in the path becomes the process id, "%r" becomes `rank` (so ranks write separate files).
Status StartTraceFromEnv(const char* var, int rank, const std::string& process_name);
// Writes every thread's buffered events; the file is complete JSON afterwards.
void FlushTrace();
// How far the file may lag behind the events: any event, and MaybeFlushTrace(), flush every
// thread's buffer once the last flush is this old.
inline constexpr std::chrono::milliseconds kTraceFlushInterval{1000};
// FlushTrace() if tracing is on and the last flush is older than kTraceFlushInterval; for loops
// that tick while no event comes (a server's housekeeping), so that the last events reach the file.
void MaybeFlushTrace();
// Flushes and closes the file; later events are dropped until the next StartTrace().
void StopTrace();
// The path being written, or "" when tracing is off.
std::string TracePath();

// Names the calling thread's track.
void TraceThreadName(std::string_view name);
// A track of its own for something that is not a thread (a connection, a server link), drawn
// like a thread: returns its number for TraceComplete, or 0 when tracing is off.
int NewTraceTrack(std::string_view name);
// A span of work ("X" event) on the calling thread (track 0) or on a track from NewTraceTrack().
// Spans on one track must nest or follow each other, never partly overlap.
void TraceComplete(std::string_view name, std::string_view cat, double start_us, double end_us,
                   const TraceArgs& args = {}, int track = 0);
// A span that may overlap others (a chunk in flight, a request): "b"/"e" events matched by
// (cat, id); spans of one (cat, name) are drawn together on a track of their own.
void TraceAsyncBegin(std::string_view name, std::string_view cat, uint64_t id, double ts_us,
                     const TraceArgs& args = {});
void TraceAsyncEnd(std::string_view name, std::string_view cat, uint64_t id, double ts_us, const TraceArgs& args = {});
// A moment ("i" event, process-wide) such as a failover.
void TraceInstant(std::string_view name, std::string_view cat, const TraceArgs& args = {});
// A sampled value drawn as a counter track ("C" event); `args` holds the series.
void TraceCounter(std::string_view name, double ts_us, const TraceArgs& args);

// Records a complete event for its own lifetime, when tracing was on at construction.
class TraceSpan {
 public:
  TraceSpan(const char* name, const char* cat) : name_(name), cat_(cat), on_(TraceOn()) {
    if (on_) start_us_ = TraceNowUs();
  }
  ~TraceSpan() {
    if (on_) TraceComplete(name_, cat_, start_us_, TraceNowUs(), args_ ? *args_ : TraceArgs());
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
  bool on() const { return on_; }
  // Only meaningful when on().
  TraceArgs& args() {
    if (!args_) args_.emplace();
    return *args_;
  }

 private:
  const char* name_;
  const char* cat_;
  bool on_;
  double start_us_ = 0;
  std::optional<TraceArgs> args_;  // built only when asked for, so an idle span costs no string
};

}  // namespace optcast::observe
