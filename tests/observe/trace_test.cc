// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Timeline traces: the file is Chrome trace-event JSON with the events written, from every thread,
// valid after each flush, never written by a forked child, and nothing is written while off.

#include "observe/trace.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

namespace optcast::observe {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("optcast-trace-test-" + std::to_string(::getpid()) + "-" + name)).string();
}

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());  // throws (failing the test) on invalid JSON
}

std::vector<json> EventsNamed(const json& trace, const std::string& name) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("name", "") == name) out.push_back(e);
  }
  return out;
}

TEST(Trace, WritesChromeTraceEvents) {
  const std::string path = TempPath("basic.json");
  ASSERT_TRUE(StartTrace(path, "test process").ok());
  ASSERT_TRUE(TraceOn());
  TraceThreadName("main thread");
  const double t0 = TraceNowUs();
  TraceComplete("work", "test", t0, t0 + 12.5,
                TraceArgs().Add("bytes", uint64_t{4096}).Add("what", "a \"quoted\" name"));
  const int track = NewTraceTrack("connection 1");
  EXPECT_GE(track, 1 << 22);
  TraceComplete("recv", "test", t0 + 1, t0 + 2, {}, track);
  TraceAsyncBegin("request", "req", 7, t0, TraceArgs().Add("seq", 7));
  TraceAsyncEnd("request", "req", 7, t0 + 30);
  TraceCounter("queue", t0 + 3, TraceArgs().Add("depth", 4));
  {
    TraceSpan span("scoped", "test");
    ASSERT_TRUE(span.on());
    span.args().Add("n", 1);
  }
  StopTrace();
  EXPECT_FALSE(TraceOn());

  const json t = ReadJson(path);
  ASSERT_TRUE(t["traceEvents"].is_array());
  const int pid = ::getpid();
  for (const auto& e : t["traceEvents"]) {
    EXPECT_EQ(e["pid"], pid) << e;
    EXPECT_TRUE(e.contains("ph") && e.contains("name") && e.contains("tid")) << e;
  }
  auto proc = EventsNamed(t, "process_name");
  ASSERT_EQ(proc.size(), 1u);
  EXPECT_EQ(proc[0]["args"]["name"], "test process");
  auto work = EventsNamed(t, "work");
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0]["ph"], "X");
  EXPECT_NEAR(work[0]["dur"].get<double>(), 12.5, 0.001);
  EXPECT_NEAR(work[0]["ts"].get<double>(), t0, 0.001);
  EXPECT_EQ(work[0]["args"]["bytes"], 4096);
  EXPECT_EQ(work[0]["args"]["what"], "a \"quoted\" name");
  auto recv = EventsNamed(t, "recv");
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0]["tid"], track);
  bool named = false;
  for (const auto& e : EventsNamed(t, "thread_name")) named |= e["tid"] == track && e["args"]["name"] == "connection 1";
  EXPECT_TRUE(named);
  auto req = EventsNamed(t, "request");
  ASSERT_EQ(req.size(), 2u);
  EXPECT_EQ(req[0]["ph"], "b");
  EXPECT_EQ(req[1]["ph"], "e");
  EXPECT_EQ(req[0]["id"], req[1]["id"]);
  EXPECT_EQ(EventsNamed(t, "queue").at(0)["args"]["depth"], 4);
  EXPECT_EQ(EventsNamed(t, "scoped").at(0)["args"]["n"], 1);
  fs::remove(path);
}

TEST(Trace, NothingIsRecordedWhileOff) {
  ASSERT_FALSE(TraceOn());
  TraceSpan span("ignored", "test");
  EXPECT_FALSE(span.on());
  EXPECT_EQ(NewTraceTrack("x"), 0);
  EXPECT_EQ(TracePath(), "");
}

TEST(Trace, FileIsValidAfterEveryFlushAndCollectsAllThreads) {
  const std::string path = TempPath("threads.json");
  ASSERT_TRUE(StartTrace(path, "threads").ok());
  constexpr int kThreads = 4, kEach = 5000;  // enough to pass the per-thread block size
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([t] {
      TraceThreadName("worker " + std::to_string(t));
      for (int i = 0; i < kEach; ++i) {
        const double now = TraceNowUs();
        TraceComplete("step", "test", now, now + 1, TraceArgs().Add("i", i).Add("thread", t));
      }
    });
  }
  for (auto& t : ts) t.join();
  FlushTrace();
  // Still open, and already complete JSON.
  json mid = ReadJson(path);
  EXPECT_EQ(EventsNamed(mid, "step").size(), size_t{kThreads} * kEach);
  const double now = TraceNowUs();
  TraceComplete("after", "test", now, now);
  FlushTrace();
  EXPECT_EQ(EventsNamed(ReadJson(path), "after").size(), 1u);
  StopTrace();
  json t = ReadJson(path);
  std::set<int> tids;
  for (const auto& e : EventsNamed(t, "step")) tids.insert(e["tid"].get<int>());
  EXPECT_EQ(tids.size(), size_t{kThreads});
  fs::remove(path);
}

TEST(Trace, AForkedChildDoesNotWriteIntoItsParentsTrace) {
  const std::string path = TempPath("fork.json");
  ASSERT_TRUE(StartTrace(path, "parent").ok());
  TraceThreadName("parent");  // caches the parent's ids, which the child must not reuse
  const std::string child_path = TempPath("fork-child.json");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const double now = TraceNowUs();
    TraceComplete("child", "test", now, now);
    FlushTrace();
    if (TraceOn()) ::_exit(1);
    // The child may start a trace of its own, under its own process and thread ids.
    if (!StartTrace(child_path, "child").ok()) ::_exit(2);
    TraceComplete("own", "test", now, now);
    StopTrace();
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "tracing was still on in the child";
  StopTrace();
  EXPECT_TRUE(EventsNamed(ReadJson(path), "child").empty());
  auto own = EventsNamed(ReadJson(child_path), "own");
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0]["pid"], pid);
  EXPECT_EQ(own[0]["tid"], pid);  // the child's only thread has the process's id
  fs::remove(path);
  fs::remove(child_path);
}

TEST(Trace, PathFromEnvironmentTakesRankAndPid) {
  const std::string pattern = TempPath("env-r%r-p%p.json");
  ::setenv("OPTCAST_TEST_TRACE", pattern.c_str(), 1);
  ASSERT_TRUE(StartTraceFromEnv("OPTCAST_TEST_TRACE", 3, "rank 3").ok());
  const std::string want = TempPath("env-r3-p" + std::to_string(::getpid()) + ".json");
  EXPECT_EQ(TracePath(), want);
  StopTrace();
  EXPECT_TRUE(fs::exists(want));
  fs::remove(want);
  ::unsetenv("OPTCAST_TEST_TRACE");
  EXPECT_TRUE(StartTraceFromEnv("OPTCAST_TEST_TRACE", 0, "x").ok());  // unset: nothing to do
  EXPECT_FALSE(TraceOn());
}

TEST(Trace, UnwritablePathIsAClearError) {
  Status st = StartTrace("/nonexistent-dir/trace.json", "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent-dir/trace.json"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("directory"), std::string::npos) << st.message();
  EXPECT_FALSE(TraceOn());
}

}  // namespace
}  // namespace optcast::observe
