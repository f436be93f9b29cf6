// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
//
// The reduction workers as the event loop uses them: tasks submitted from one thread, finished
// ones collected when the wake-up descriptor turns readable. Results are checked against a
// scalar loop in the test; run under -fsanitize=thread by scripts/sanitize.sh thread.

#include "server/reduce_workers.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace optcast::server {
namespace {

// A task that owns its buffers (the server's tasks own references to theirs).
struct OwnedTask : ReduceTask {
  std::vector<std::vector<int32_t>> inputs;
  std::vector<int32_t> out;
  int id = 0;
};

std::unique_ptr<OwnedTask> MakeTask(int id, int nsrc, size_t count, std::mt19937& rng) {
  auto t = std::make_unique<OwnedTask>();
  t->id = id;
  t->dtype = DataType::kInt32;
  t->op = RedOp::kSum;
  t->inputs.assign(nsrc, std::vector<int32_t>(count));
  for (auto& in : t->inputs) {
    for (auto& v : in) v = static_cast<int32_t>(rng() % 2001) - 1000;
  }
  t->out.assign(count, 0);
  for (const auto& in : t->inputs) t->srcs.push_back(in.data());
  t->dst = t->out.data();
  t->count = count;
  t->status = InternalError("not run");
  return t;
}

// What the task must hold once a worker ran it: the element-wise sum in plain scalar code.
std::string CheckTask(const OwnedTask& t) {
  if (!t.status.ok()) return "task " + std::to_string(t.id) + ": " + t.status.ToString();
  for (size_t i = 0; i < t.count; ++i) {
    int32_t want = 0;
    for (const auto& in : t.inputs) want += in[i];
    if (t.out[i] != want) {
      return "task " + std::to_string(t.id) + " element " + std::to_string(i) + ": got " + std::to_string(t.out[i]) +
             ", want " + std::to_string(want);
    }
  }
  return "";
}

// Collects finished tasks as the event loop does, until `want` came back or 10 s passed.
std::vector<ReduceTask*> CollectAll(ReduceWorkers& workers, size_t want) {
  std::vector<ReduceTask*> done;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (done.size() < want && std::chrono::steady_clock::now() < deadline) {
    pollfd p{workers.wake_fd(), POLLIN, 0};
    if (poll(&p, 1, 100) > 0) workers.TakeFinished(&done);
  }
  return done;
}

TEST(ReduceWorkers, ThreadsLeaveOneCoreToTheEventLoop) {
  EXPECT_EQ(ReduceWorkers::ThreadsForCores(0), 1);  // unknown core count
  EXPECT_EQ(ReduceWorkers::ThreadsForCores(1), 1);
  EXPECT_EQ(ReduceWorkers::ThreadsForCores(2), 1);
  EXPECT_EQ(ReduceWorkers::ThreadsForCores(16), 15);
  EXPECT_EQ(ReduceWorkers::ThreadsForCores(1000), 64);
}

TEST(ReduceWorkers, EveryTaskComesBackOnceWithTheRightSum) {
  ReduceWorkers workers(3);
  ASSERT_EQ(workers.threads(), 3);
  std::mt19937 rng(1);
  std::vector<std::unique_ptr<OwnedTask>> tasks;
  for (int i = 0; i < 400; ++i) tasks.push_back(MakeTask(i, 1 + i % 8, 1 + (i * 97) % 5000, rng));
  // Submitted in bursts, collected in between, as chunks arrive and results go out.
  std::vector<ReduceTask*> done;
  for (size_t i = 0; i < tasks.size(); ++i) {
    workers.Submit(tasks[i].get());
    if (i % 50 == 49) workers.TakeFinished(&done);
  }
  auto rest = CollectAll(workers, tasks.size() - done.size());
  done.insert(done.end(), rest.begin(), rest.end());
  ASSERT_EQ(done.size(), tasks.size()) << "tasks lost or still running after 10 s";
  std::vector<int> seen(tasks.size(), 0);
  for (ReduceTask* t : done) ++seen[static_cast<OwnedTask*>(t)->id];
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "task " << i;
  for (const auto& t : tasks) ASSERT_EQ(CheckTask(*t), "");
}

TEST(ReduceWorkers, InPlaceIntoTheFirstSource) {
  ReduceWorkers workers(2);
  std::mt19937 rng(2);
  auto t = MakeTask(0, 5, 3000, rng);
  std::vector<int32_t> first = t->inputs[0];
  std::vector<int32_t> want(3000, 0);
  for (const auto& in : t->inputs) {
    for (size_t i = 0; i < want.size(); ++i) want[i] += in[i];
  }
  t->dst = t->inputs[0].data();
  workers.Submit(t.get());
  ASSERT_EQ(CollectAll(workers, 1).size(), 1u);
  ASSERT_TRUE(t->status.ok()) << t->status.ToString();
  EXPECT_EQ(t->inputs[0], want);
}

TEST(ReduceWorkers, ABadTaskReportsItsErrorAndOthersStillRun) {
  ReduceWorkers workers(2);
  std::mt19937 rng(3);
  auto good = MakeTask(0, 3, 100, rng);
  auto bad = MakeTask(1, 3, 100, rng);
  bad->srcs[1] = nullptr;
  workers.Submit(bad.get());
  workers.Submit(good.get());
  ASSERT_EQ(CollectAll(workers, 2).size(), 2u);
  EXPECT_FALSE(bad->status.ok());
  EXPECT_NE(bad->status.message().find("source 1 is null"), std::string::npos) << bad->status.ToString();
  EXPECT_EQ(CheckTask(*good), "");
}

TEST(ReduceWorkers, DestructionFinishesQueuedTasks) {
  std::mt19937 rng(4);
  std::vector<std::unique_ptr<OwnedTask>> tasks;
  for (int i = 0; i < 100; ++i) tasks.push_back(MakeTask(i, 4, 4096, rng));
  {
    ReduceWorkers workers(2);
    for (auto& t : tasks) workers.Submit(t.get());
  }
  for (const auto& t : tasks) ASSERT_EQ(CheckTask(*t), "");
}

}  // namespace
}  // namespace optcast::server
