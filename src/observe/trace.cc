// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "observe/trace.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace optcast::observe {

namespace {

constexpr char kFooter[] = "\n]}\n";
constexpr long kFooterLen = sizeof(kFooter) - 1;
// A thread hands its events to the file once it holds this much.
constexpr size_t kThreadBlock = 1u << 20;

struct ThreadBuffer {
  std::mutex mu;
  std::string data;
};

// Everything about the open trace. Leaked on purpose: threads and atexit handlers may still call
// in while static destructors run.
struct TraceState {
  std::mutex mu;  // guards the fields below; never held while taking a ThreadBuffer's lock
  FILE* file = nullptr;
  std::string path;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
};

TraceState* g_state = new TraceState;
// Bumped at every start, stop and fork, never reset: a thread's buffer from an earlier trace (or
// from the parent process) is never mistaken for one of the current trace.
std::atomic<uint64_t> g_generation{0};

// When the file was last brought up to date with every thread's buffer (TraceNowUs), and when
// that is next due; a flush is claimed by moving `g_next_flush_us` forward.
std::atomic<double> g_next_flush_us{0};

// Cached: both are system calls, and a forked child resets them (see AfterForkInChild).
std::atomic<int> g_pid{0};
thread_local int t_tid = 0;

int ProcessId() {
  int pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = static_cast<int>(::getpid());
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

int ThreadId() {
  if (t_tid == 0) t_tid = static_cast<int>(::syscall(SYS_gettid));
  return t_tid;
}

void AppendEscaped(std::string* out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          *out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          *out += c;
        }
    }
  }
}

// Writes a block of events (each starting with ",\n") just before the footer, then the footer
// again, so the file is valid JSON whenever the lock is free.
void WriteBlockLocked(TraceState& st, const std::string& block) {
  if (st.file == nullptr || block.empty()) return;
  std::fseek(st.file, -kFooterLen, SEEK_END);
  std::fwrite(block.data(), 1, block.size(), st.file);
  std::fwrite(kFooter, 1, kFooterLen, st.file);
  std::fflush(st.file);
}

void WriteBlock(const std::string& block) {
  TraceState& st = *g_state;
  std::lock_guard<std::mutex> lock(st.mu);
  WriteBlockLocked(st, block);
}

// The calling thread's buffer for the current trace, registered on first use.
ThreadBuffer& LocalBuffer() {
  struct Local {
    std::shared_ptr<ThreadBuffer> buf;
    uint64_t generation = ~uint64_t{0};
    ~Local() {
      // A thread that ends hands over what it still holds.
      if (!buf || generation != g_generation.load()) return;
      std::string block;
      {
        std::lock_guard<std::mutex> lock(buf->mu);
        block.swap(buf->data);
      }
      WriteBlock(block);
    }
  };
  thread_local Local local;
  TraceState& st = *g_state;
  const uint64_t gen = g_generation.load(std::memory_order_acquire);
  if (!local.buf || local.generation != gen) {
    local.buf = std::make_shared<ThreadBuffer>();
    local.generation = gen;
    std::lock_guard<std::mutex> lock(st.mu);
    st.buffers.push_back(local.buf);
  }
  return *local.buf;
}

// Appends one event (a JSON object without the leading separator) to this thread's buffer.
void Emit(const std::string& event) {
  ThreadBuffer& buf = LocalBuffer();
  std::string block;
  {
    std::lock_guard<std::mutex> lock(buf.mu);
    buf.data += ",\n";
    buf.data += event;
    if (buf.data.size() >= kThreadBlock) block.swap(buf.data);
  }
  if (!block.empty()) WriteBlock(block);
  MaybeFlushTrace();
}

std::string EventHead(std::string_view name, std::string_view cat, char ph, double ts_us, int track = 0) {
  std::string e = "{\"name\":\"";
  AppendEscaped(&e, name);
  e += "\",\"cat\":\"";
  AppendEscaped(&e, cat);
  e += fmt::format("\",\"ph\":\"{}\",\"ts\":{:.3f},\"pid\":{},\"tid\":{}", ph, ts_us, ProcessId(),
                   track != 0 ? track : ThreadId());
  return e;
}

void AppendArgs(std::string* e, const TraceArgs& args) {
  if (!args.fields().empty()) {
    *e += ",\"args\":{";
    *e += args.fields();
    *e += '}';
  }
  *e += '}';
}

std::string MetadataEvent(const char* what, int tid, std::string_view value) {
  std::string e = fmt::format("{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"", what,
                              ProcessId(), tid);
  AppendEscaped(&e, value);
  return e + "\"}}";
}

// A forked child must not write into its parent's file: it starts with tracing off and a fresh
// state (the parent's locks may have been held by threads that do not exist in the child).
void AfterForkInChild() {
  g_trace_on.store(false);
  g_state = new TraceState;
  g_generation.fetch_add(1);
  g_pid.store(0);
  t_tid = 0;  // the only thread of the child is the one that forked
}

void StopAtExit() { StopTrace(); }

}  // namespace

double TraceNowUs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void TraceArgs::Key(std::string_view key) {
  if (!fields_.empty()) fields_ += ',';
  fields_ += '"';
  AppendEscaped(&fields_, key);
  fields_ += "\":";
}

TraceArgs& TraceArgs::Add(std::string_view key, int64_t v) {
  Key(key);
  fields_ += fmt::format("{}", v);
  return *this;
}

TraceArgs& TraceArgs::Add(std::string_view key, uint64_t v) {
  Key(key);
  fields_ += fmt::format("{}", v);
  return *this;
}

TraceArgs& TraceArgs::Add(std::string_view key, double v) {
  Key(key);
  fields_ += fmt::format("{}", v);
  return *this;
}

TraceArgs& TraceArgs::Add(std::string_view key, std::string_view v) {
  Key(key);
  fields_ += '"';
  AppendEscaped(&fields_, v);
  fields_ += '"';
  return *this;
}

Status StartTrace(const std::string& path, const std::string& process_name) {
  static std::once_flag hooks;
  std::call_once(hooks, [] {
    ::pthread_atfork(nullptr, nullptr, AfterForkInChild);
    std::atexit(StopAtExit);
  });
  TraceState& st = *g_state;
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.file != nullptr) {
    return InvalidArgument("a trace is already being written to " + st.path + "; stop it before starting another");
  }
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return InvalidArgument(
        fmt::format("cannot create trace file '{}': {}; check that the directory exists and is "
                    "writable",
                    path, std::strerror(errno)));
  }
  st.file = f;
  st.path = path;
  st.buffers.clear();
  g_generation.fetch_add(1);
  std::string head = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  head += MetadataEvent("process_name", 0, process_name);
  std::fwrite(head.data(), 1, head.size(), f);
  std::fwrite(kFooter, 1, kFooterLen, f);
  std::fflush(f);
  g_next_flush_us.store(TraceNowUs() + std::chrono::duration<double, std::micro>(kTraceFlushInterval).count());
  g_trace_on.store(true);
  return Status::Ok();
}

Status StartTraceFromEnv(const char* var, int rank, const std::string& process_name) {
  const char* value = std::getenv(var);
  if (value == nullptr || *value == '\0' || TraceOn()) return Status::Ok();
  // Several ranks of one process (NCCL's proxy threads, tests) may create communicators at once:
  // the first starts the trace, the others find it on.
  static std::mutex start_mu;
  std::lock_guard<std::mutex> lock(start_mu);
  if (TraceOn()) return Status::Ok();
  std::string path;
  for (const char* p = value; *p; ++p) {
    if (p[0] == '%' && p[1] == 'p') {
      path += std::to_string(ProcessId());
      ++p;
    } else if (p[0] == '%' && p[1] == 'r') {
      path += std::to_string(rank);
      ++p;
    } else {
      path += *p;
    }
  }
  Status s = StartTrace(path, process_name);
  if (!s.ok()) return Status(s.code(), std::string(var) + ": " + s.message());
  return s;
}

void FlushTrace() {
  TraceState& st = *g_state;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.file == nullptr) return;
    buffers = st.buffers;
  }
  std::string block;
  for (auto& b : buffers) {
    std::lock_guard<std::mutex> lock(b->mu);
    block += b->data;
    b->data.clear();
  }
  WriteBlock(block);
}

void MaybeFlushTrace() {
  if (!TraceOn()) return;
  const double now = TraceNowUs();
  double due = g_next_flush_us.load(std::memory_order_relaxed);
  if (now < due) return;
  // One thread wins the flush; the others go on at once.
  const double next = now + std::chrono::duration<double, std::micro>(kTraceFlushInterval).count();
  if (!g_next_flush_us.compare_exchange_strong(due, next, std::memory_order_relaxed)) return;
  FlushTrace();
}

void StopTrace() {
  g_trace_on.store(false);
  FlushTrace();
  TraceState& st = *g_state;
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.file == nullptr) return;
  std::fclose(st.file);
  st.file = nullptr;
  st.path.clear();
  st.buffers.clear();
  g_generation.fetch_add(1);
}

std::string TracePath() {
  TraceState& st = *g_state;
  std::lock_guard<std::mutex> lock(st.mu);
  return st.path;
}

void TraceThreadName(std::string_view name) {
  if (!TraceOn()) return;
  Emit(MetadataEvent("thread_name", ThreadId(), name));
}

int NewTraceTrack(std::string_view name) {
  if (!TraceOn()) return 0;
  // Above Linux's largest thread id (pid_max is at most 2^22), so never a real thread's number.
  static std::atomic<int> next{1 << 22};
  const int track = next.fetch_add(1);
  Emit(MetadataEvent("thread_name", track, name));
  return track;
}

void TraceComplete(std::string_view name, std::string_view cat, double start_us, double end_us, const TraceArgs& args,
                   int track) {
  if (!TraceOn()) return;
  std::string e = EventHead(name, cat, 'X', start_us, track);
  e += fmt::format(",\"dur\":{:.3f}", end_us > start_us ? end_us - start_us : 0.0);
  AppendArgs(&e, args);
  Emit(e);
}

void TraceAsyncBegin(std::string_view name, std::string_view cat, uint64_t id, double ts_us, const TraceArgs& args) {
  if (!TraceOn()) return;
  std::string e = EventHead(name, cat, 'b', ts_us);
  e += fmt::format(",\"id\":\"0x{:x}\"", id);
  AppendArgs(&e, args);
  Emit(e);
}

void TraceAsyncEnd(std::string_view name, std::string_view cat, uint64_t id, double ts_us, const TraceArgs& args) {
  if (!TraceOn()) return;
  std::string e = EventHead(name, cat, 'e', ts_us);
  e += fmt::format(",\"id\":\"0x{:x}\"", id);
  AppendArgs(&e, args);
  Emit(e);
}

void TraceInstant(std::string_view name, std::string_view cat, const TraceArgs& args) {
  if (!TraceOn()) return;
  std::string e = EventHead(name, cat, 'i', TraceNowUs());
  e += ",\"s\":\"p\"";
  AppendArgs(&e, args);
  Emit(e);
}

void TraceCounter(std::string_view name, double ts_us, const TraceArgs& args) {
  if (!TraceOn()) return;
  std::string e = EventHead(name, "counter", 'C', ts_us);
  AppendArgs(&e, args);
  Emit(e);
}

}  // namespace optcast::observe
