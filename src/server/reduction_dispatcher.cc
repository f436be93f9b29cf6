// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/reduction_dispatcher.h"

#include <fmt/format.h>

#include "observe/trace.h"
#include "server/tree_math.h"

namespace optcast::server {
namespace {

// Which reductions go to the workers: those of collectives with more than one chunk on this
// server (a pipeline, where the loop keeps receiving while workers reduce) that read at least
// this much (all members' contributions together), while reducing needs a real share of a core
// (ReduceLoad). A collective of one chunk is latency-bound: waking a worker would cost more than
// the reduction itself, so the loop reduces it.
constexpr uint64_t kOffloadBytes = 64 * 1024;
// A reduction this large (a fabric's 1 MiB chunks from several members) would hold the loop for a
// few hundred microseconds, which every other connection would wait out: it goes to a worker
// however little the reductions have needed lately.
constexpr uint64_t kLongReductionBytes = 2 * 1024 * 1024;

}  // namespace

// One chunk's reduction. On a worker it holds the job and the contributions, so they outlive a
// job that fails meanwhile; the loop drops them when it takes the task back.
struct ChunkReduction : ReduceTask {
  std::shared_ptr<Job> job;
  uint64_t coll_seq = 0;
  SlotKey key{};
  std::vector<std::shared_ptr<uint8_t>> keep;
  uint64_t read_bytes = 0;  // all sources together, for the offload decision and the trace

  // Aggregation tree (server/tree_math.h): the members' contributions, some of them partials
  // from downstream servers, combine into a partial in `partial`; the root also finishes it.
  bool tree = false;
  std::unique_ptr<bool[]> is_partial;
  size_t is_partial_capacity = 0;
  bool finish = false;
  uint32_t nranks = 0;
  std::shared_ptr<uint8_t> partial;
  std::vector<uint8_t> scratch;

  Status Reduce() override {
    if (!tree) return ReduceTask::Reduce();
    OPTCAST_RETURN_IF_ERROR(CombineToPartial(dtype, op, srcs.data(), is_partial.get(), static_cast<int>(srcs.size()),
                                             partial.get(), count, &scratch));
    return finish ? FinishPartial(dtype, op, partial.get(), count, nranks) : Status::Ok();
  }
};

ReductionDispatcher::ReductionDispatcher(ServerMetrics& metrics, JobTable& jobs, BufferPool& pool, double offload_share)
    : metrics_(metrics), jobs_(jobs), pool_(pool), load_(offload_share) {}

ReductionDispatcher::~ReductionDispatcher() { StopWorkers(); }

void ReductionDispatcher::CreateWorkers(int threads) {
  if (threads > 0) workers_ = std::make_unique<ReduceWorkers>(threads, /*start_now=*/false);
}

void ReductionDispatcher::StartWorkers() {
  if (!workers_) return;
  workers_->Start();
  metrics_.SetReduceThreads(static_cast<uint64_t>(workers_->threads()));
}

void ReductionDispatcher::StopWorkers() { workers_.reset(); }

void ReductionDispatcher::Reduce(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit) {
  ChunkReduction* task = TakeTask();
  if (!Prepare(job, cit->second, sit->second, task)) {
    ReleaseTask(task);
    return;
  }
  const bool pipelined = cit->second.desc.server_elems > sit->second.ref.count;
  const bool worth_a_worker = task->read_bytes >= kLongReductionBytes ||
                              (task->read_bytes >= kOffloadBytes && load_.WorthWorkers(Clock::now()));
  if (workers_ && pipelined && worth_a_worker) {
    task->job = job;
    task->coll_seq = cit->first;
    task->key = sit->first;
    task->keep.assign(sit->second.contribs.begin(), sit->second.contribs.end());
    metrics_.ReducedOnWorker();
    workers_->Submit(task);
    return;
  }
  RunHere(job, cit, sit, task);
}

bool ReductionDispatcher::Prepare(const std::shared_ptr<Job>& job, const CollState& coll, Slot& slot,
                                  ChunkReduction* task) {
  const wire::CollDesc& d = coll.desc;
  task->dtype = d.dtype;
  task->op = d.op;
  task->count = slot.ref.count;
  task->tree = job->tree != nullptr;
  if (!task->tree) {
    // In rank order, in place: the result lands in contribs[0].
    task->srcs.resize(job->nranks);
    for (uint32_t r = 0; r < job->nranks; ++r) task->srcs[r] = slot.contribs[r].get();
    task->dst = slot.contribs[0].get();
    task->read_bytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(d.dtype) * job->nranks;
    return true;
  }
  // A tree combines its members' contributions in the sealed order into a new partial buffer.
  const TreeJob& t = *job->tree;
  const uint64_t pbytes = static_cast<uint64_t>(slot.ref.count) * DataTypeSize(PartialType(d.dtype, d.op));
  if (auto failure = jobs_.ChargeBuffer(*job, BufferPool::CapacityFor(pbytes), "a partial result")) {
    jobs_.Fail(job, *failure);
    return false;
  }
  task->partial = pool_.Get(pbytes, job->memory);
  if (!task->partial) {
    jobs_.Fail(job, {Code::kResourceExhausted, fmt::format("cannot allocate {} bytes for a partial result", pbytes)});
    return false;
  }
  const std::vector<uint32_t>& order = t.members.order();
  task->srcs.resize(order.size());
  if (task->is_partial_capacity < order.size()) {
    task->is_partial.reset(new bool[order.size()]);
    task->is_partial_capacity = order.size();
  }
  for (size_t i = 0; i < order.size(); ++i) {
    task->srcs[i] = slot.contribs[t.members.seat(order[i])].get();
    task->is_partial[i] = t.members.is_server(order[i]);
  }
  task->dst = task->partial.get();
  task->finish = t.root();
  task->nranks = job->nranks;
  task->read_bytes = pbytes * order.size();
  return true;
}

void ReductionDispatcher::RunHere(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit, ChunkReduction* task) {
  Status st;
  {
    observe::TraceSpan span("reduce", "server");
    const auto t0 = Clock::now();
    st = task->Reduce();
    const auto t1 = Clock::now();
    metrics_.Reduced(t1 - t0);
    load_.Add(t1 - t0, t1);
    if (span.on()) {
      const uint64_t members = task->srcs.size();
      span.args() = ChunkTraceArgs(cit->second.desc, sit->second.ref, task->read_bytes / members)
                        .Add(task->tree ? "members" : "ranks", members);
    }
  }
  if (st.ok()) {
    Deliver(job, cit, sit, task);
  } else {
    jobs_.Fail(job, {Code::kInternal, "reduction failed: " + st.message()});
  }
  ReleaseTask(task);
}

void ReductionDispatcher::CollectFinished() {
  finished_scratch_.clear();
  workers_->TakeFinished(&finished_scratch_);
  for (ReduceTask* t : finished_scratch_) {
    auto* task = static_cast<ChunkReduction*>(t);
    const std::shared_ptr<Job> job = std::move(task->job);
    // A job that failed meanwhile has forgotten the slot; its buffers are let go below, on the
    // loop thread that owns the pool.
    auto cit = job->failed ? job->colls.end() : job->colls.find(task->coll_seq);
    if (cit != job->colls.end()) {
      auto sit = cit->second.slots.find(task->key);
      if (sit != cit->second.slots.end()) {
        if (task->status.ok()) {
          metrics_.Reduced(task->elapsed);
          job->last_progress = Clock::now();
          load_.Add(task->elapsed, job->last_progress);
          Deliver(job, cit, sit, task);
        } else {
          jobs_.Fail(job, {Code::kInternal, "reduction failed: " + task->status.message()});
        }
      }
    }
    ReleaseTask(task);
  }
}

void ReductionDispatcher::Deliver(const std::shared_ptr<Job>& job, CollIt cit, SlotIt sit, ChunkReduction* task) {
  Slot& slot = sit->second;
  if (task->tree) {
    slot.contribs.assign(slot.contribs.size(), nullptr);  // the members' buffers are no longer needed
    slot.result = std::move(task->partial);
  } else {
    slot.result = slot.contribs[0];
  }
  sink_->OnReduced(job, cit, sit);
}

// A recycled task, or a new one while fewer are in flight than ever before.
ChunkReduction* ReductionDispatcher::TakeTask() {
  if (free_tasks_.empty()) {
    all_tasks_.push_back(std::make_unique<ChunkReduction>());
    return all_tasks_.back().get();
  }
  ChunkReduction* task = free_tasks_.back();
  free_tasks_.pop_back();
  return task;
}

void ReductionDispatcher::ReleaseTask(ChunkReduction* task) {
  task->job.reset();
  task->keep.clear();
  task->partial.reset();
  free_tasks_.push_back(task);
}

}  // namespace optcast::server
