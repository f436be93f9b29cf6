// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "process_group.h"

#include <cstring>
#include <stdexcept>

namespace optcast::torch_backend {
namespace {

// Rank 0 picks the job id and publishes it under this key of the group's (prefixed) store.
constexpr const char* kJobIdKey = "optcast_job_id";

DataType ToDataType(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DataType::kFloat32;
    case at::kHalf: return DataType::kFloat16;
    case at::kBFloat16: return DataType::kBFloat16;
    case at::kDouble: return DataType::kFloat64;
    case at::kChar: return DataType::kInt8;
    case at::kByte: return DataType::kUInt8;
    case at::kInt: return DataType::kInt32;
    case at::kLong: return DataType::kInt64;
    default:
      TORCH_CHECK(false, "the optcast backend cannot reduce tensors of type ", t.scalar_type(),
                  "; use float32, float16, bfloat16, float64, int8, uint8, int32 or int64");
  }
}

RedOp ToRedOp(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return RedOp::kSum;
    case c10d::ReduceOp::AVG: return RedOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return RedOp::kProd;
    case c10d::ReduceOp::MIN: return RedOp::kMin;
    case c10d::ReduceOp::MAX: return RedOp::kMax;
    case c10d::ReduceOp::BAND: return RedOp::kBand;
    case c10d::ReduceOp::BOR: return RedOp::kBor;
    case c10d::ReduceOp::BXOR: return RedOp::kBxor;
    default:
      TORCH_CHECK(false, "the optcast backend does not support this ReduceOp (", int(op.op_),
                  "); use SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR or BXOR");
  }
}

// The op for a tensor of this dtype, refused at the call where the servers do not define it.
RedOp ToRedOpFor(const c10d::ReduceOp& op, DataType dt) {
  const RedOp r = ToRedOp(op);
  TORCH_CHECK(IsRedOpDefinedFor(r, dt), "the optcast backend: ", UndefinedRedOpMessage(r, dt));
  return r;
}

void CheckCpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "the optcast backend works on CPU tensors; ", what, " got a tensor on ", t.device(),
              " (use NCCL with libnccl-net-optcast.so for GPU tensors)");
  TORCH_CHECK(!t.is_sparse(), "the optcast backend does not handle sparse tensors (", what, ")");
}

void CheckOne(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "the optcast backend takes one tensor per process in ", what, ", got ",
              tensors.size());
  CheckCpu(tensors[0], what);
}

size_t Bytes(const at::Tensor& t) { return size_t(t.numel()) * t.element_size(); }

// A contiguous tensor to work in: `t` itself or a copy that is written back afterwards.
at::Tensor Dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
void WriteBack(const at::Tensor& dense, at::Tensor& t) {
  if (!dense.is_same(t)) t.copy_(dense);
}

}  // namespace

OptcastWork::OptcastWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void OptcastWork::Complete(const Status& status) {
  if (status.ok()) {
    finish();
    future_->markCompleted(c10::IValue(outputs_));
  } else {
    auto error = std::make_exception_ptr(std::runtime_error("optcast: " + status.ToString()));
    finish(error);
    future_->setError(error);
  }
}

void ProcessGroupOptcast::setWireDtype(const std::string& name) {
  DataType wire = DataType::kFloat32;
  const Status st = ParseWireDtype(name, "wire_dtype", &wire);
  if (!st.ok()) throw std::invalid_argument("optcast backend: " + st.message());
  // In the queue, so that the collectives queued before it keep the old wire type and those
  // after it get the new one, in the order this rank called them.
  Enqueue(c10d::OpType::UNKNOWN, {}, [wire](Communicator& c) { return c.SetWireDtype(wire); });
}

ProcessGroupOptcast::ProcessGroupOptcast(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                         std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::ProcessGroup> gloo)
    : c10d::ProcessGroup(rank, size), gloo_(std::move(gloo)) {
  if (gloo_ && (gloo_->getRank() != rank || gloo_->getSize() != size)) {
    throw std::runtime_error("optcast backend: the gloo group given is rank " + std::to_string(gloo_->getRank()) +
                             " of " + std::to_string(gloo_->getSize()) + ", this group rank " + std::to_string(rank) +
                             " of " + std::to_string(size));
  }
  CommunicatorOptions opts;
  opts.timeout = timeout;
  Status st = ApplyEnvironment(&opts);
  if (!st.ok()) throw std::runtime_error("optcast backend: " + st.message());
  if (opts.servers.empty()) {
    throw std::runtime_error(
        "optcast backend: OPTCAST_SERVERS is not set; start reduction servers with `optcast server` and set "
        "OPTCAST_SERVERS=host:port[,host:port...] in every process");
  }
  if (rank == 0) {
    const std::string hex = JobId::Random().ToHex();
    store->set(kJobIdKey, std::vector<uint8_t>(hex.begin(), hex.end()));
  }
  const std::vector<uint8_t> got = store->get(kJobIdKey);  // waits for rank 0, bounded by the store
  auto id = JobId::FromHex(std::string(got.begin(), got.end()));
  if (!id)
    throw std::runtime_error("optcast backend: the store holds a malformed job id under " + std::string(kJobIdKey));
  opts.job_id = *id;
  opts.rank = rank;
  opts.nranks = size;
  st = Communicator::Create(opts, &comm_);
  if (!st.ok()) throw std::runtime_error("optcast backend: rank " + std::to_string(rank) + ": " + st.ToString());
  init();
  worker_ = std::thread([this] { WorkerLoop(); });
}

ProcessGroupOptcast::~ProcessGroupOptcast() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void ProcessGroupOptcast::WorkerLoop() {
  while (true) {
    std::pair<c10::intrusive_ptr<OptcastWork>, Body> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left to do
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    Status st;
    try {
      st = task.second(*comm_);
    } catch (const std::exception& e) {
      st = InternalError(e.what());
    }
    task.first->Complete(st);
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::Enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                            Body body) {
  auto work = c10::make_intrusive<OptcastWork>(rank_, type, std::move(outputs));
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!stopping_, "the optcast process group is shutting down");
    queue_.emplace_back(work, std::move(body));
  }
  cv_.notify_one();
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::allreduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::AllreduceOptions& opts) {
  CheckOne(tensors, "allreduce");
  at::Tensor t = tensors[0];
  const DataType dt = ToDataType(t);
  const RedOp op = ToRedOpFor(opts.reduceOp, dt);
  return Enqueue(c10d::OpType::ALLREDUCE, tensors, [t, dt, op](Communicator& c) mutable {
    at::Tensor d = Dense(t);
    Status st = c.AllReduce(d.data_ptr(), d.data_ptr(), size_t(d.numel()), dt, op);
    if (st.ok()) WriteBack(d, t);
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                        const c10d::AllreduceCoalescedOptions& opts) {
  const RedOp op = ToRedOp(opts.reduceOp);
  for (const auto& t : tensors) {
    CheckCpu(t, "allreduce_coalesced");
    ToRedOpFor(opts.reduceOp, ToDataType(t));
  }
  return Enqueue(c10d::OpType::ALLREDUCE, tensors, [tensors, op](Communicator& c) mutable {
    for (at::Tensor& t : tensors) {
      at::Tensor d = Dense(t);
      OPTCAST_RETURN_IF_ERROR(c.AllReduce(d.data_ptr(), d.data_ptr(), size_t(d.numel()), ToDataType(d), op));
      WriteBack(d, t);
    }
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::reduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::ReduceOptions& opts) {
  CheckOne(tensors, "reduce");
  at::Tensor t = tensors[0];
  const DataType dt = ToDataType(t);
  const RedOp op = ToRedOpFor(opts.reduceOp, dt);
  const bool root = opts.rootRank == rank_;
  // An allreduce whose result only the root keeps: other ranks' tensors stay as they were.
  return Enqueue(c10d::OpType::REDUCE, tensors, [t, dt, op, root](Communicator& c) mutable {
    at::Tensor d = t.contiguous().clone();
    Status st = c.AllReduce(d.data_ptr(), d.data_ptr(), size_t(d.numel()), dt, op);
    if (st.ok() && root) t.copy_(d);
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::broadcast(std::vector<at::Tensor>& tensors,
                                                              const c10d::BroadcastOptions& opts) {
  CheckOne(tensors, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "broadcast root ", opts.rootRank,
              " is not a rank of this group of ", size_);
  at::Tensor t = tensors[0];
  const bool root = opts.rootRank == rank_;
  // A byte-wise sum where only the root contributes non-zero bytes: the root's bits, exactly,
  // for every dtype.
  return Enqueue(c10d::OpType::BROADCAST, tensors, [t, root](Communicator& c) mutable {
    at::Tensor d = Dense(t);
    if (!root) std::memset(d.data_ptr(), 0, Bytes(d));
    Status st = c.AllReduce(d.data_ptr(), d.data_ptr(), Bytes(d), DataType::kUInt8, RedOp::kSum);
    if (st.ok()) WriteBack(d, t);
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllgatherOptions&) {
  CheckOne(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && int(outputs[0].size()) == size_, "allgather wants one list of ", size_,
              " output tensors");
  at::Tensor in = inputs[0];
  for (const auto& o : outputs[0]) {
    CheckCpu(o, "allgather");
    TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                "allgather output tensors must match the input's size and dtype");
  }
  std::vector<at::Tensor> outs = outputs[0];
  const int size = size_;
  return Enqueue(c10d::OpType::ALLGATHER, outs, [in, outs, size](Communicator& c) mutable {
    at::Tensor src = in.contiguous();
    at::Tensor flat = at::empty({int64_t(size), src.numel()}, src.options());
    OPTCAST_RETURN_IF_ERROR(c.AllGather(src.data_ptr(), flat.data_ptr(), Bytes(src), DataType::kUInt8));
    for (int r = 0; r < size; ++r) outs[r].copy_(flat[r].view(outs[r].sizes()));
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                    const c10d::AllgatherOptions&) {
  CheckCpu(input, "_allgather_base");
  CheckCpu(output, "_allgather_base");
  TORCH_CHECK(output.numel() == input.numel() * size_ && output.scalar_type() == input.scalar_type(),
              "_allgather_base wants an output of world_size times the input's elements, same dtype");
  at::Tensor in = input, out = output;
  return Enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [in, out](Communicator& c) mutable {
    at::Tensor src = in.contiguous(), dst = Dense(out);
    OPTCAST_RETURN_IF_ERROR(c.AllGather(src.data_ptr(), dst.data_ptr(), Bytes(src), DataType::kUInt8));
    WriteBack(dst, out);
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                   std::vector<std::vector<at::Tensor>>& inputs,
                                                                   const c10d::ReduceScatterOptions& opts) {
  CheckOne(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && int(inputs[0].size()) == size_, "reduce_scatter wants one list of ", size_,
              " input tensors");
  at::Tensor out = outputs[0];
  for (const auto& i : inputs[0]) {
    CheckCpu(i, "reduce_scatter");
    TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                "reduce_scatter input tensors must match the output's size and dtype");
  }
  std::vector<at::Tensor> ins = inputs[0];
  const DataType dt = ToDataType(out);
  const RedOp op = ToRedOpFor(opts.reduceOp, dt);
  return Enqueue(c10d::OpType::REDUCE_SCATTER, outputs, [out, ins, dt, op](Communicator& c) mutable {
    std::vector<at::Tensor> flat_parts;
    for (const auto& i : ins) flat_parts.push_back(i.reshape({-1}));
    at::Tensor flat = at::cat(flat_parts);
    at::Tensor dst = Dense(out);
    OPTCAST_RETURN_IF_ERROR(c.ReduceScatter(flat.data_ptr(), dst.data_ptr(), size_t(dst.numel()), dt, op));
    WriteBack(dst, out);
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                         const c10d::ReduceScatterOptions& opts) {
  CheckCpu(input, "_reduce_scatter_base");
  CheckCpu(output, "_reduce_scatter_base");
  TORCH_CHECK(input.numel() == output.numel() * size_ && output.scalar_type() == input.scalar_type(),
              "_reduce_scatter_base wants an input of world_size times the output's elements, same dtype");
  at::Tensor in = input, out = output;
  const DataType dt = ToDataType(out);
  const RedOp op = ToRedOpFor(opts.reduceOp, dt);
  return Enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, [in, out, dt, op](Communicator& c) mutable {
    at::Tensor src = in.contiguous(), dst = Dense(out);
    OPTCAST_RETURN_IF_ERROR(c.ReduceScatter(src.data_ptr(), dst.data_ptr(), size_t(dst.numel()), dt, op));
    WriteBack(dst, out);
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::barrier(const c10d::BarrierOptions& opts) {
  // Queued behind every earlier collective, and complete only when every rank has reached it.
  // gloo's barrier, issued now, also waits for the gloo group's earlier work, as a gloo script
  // expects of a barrier after isend.
  c10::intrusive_ptr<c10d::Work> gloo_barrier;
  if (gloo_) gloo_barrier = gloo_->barrier(opts);
  return Enqueue(c10d::OpType::BARRIER, {}, [gloo_barrier](Communicator& c) {
    uint8_t token = 1;
    OPTCAST_RETURN_IF_ERROR(c.AllReduce(&token, &token, 1, DataType::kUInt8, RedOp::kSum));
    if (gloo_barrier) gloo_barrier->wait();  // throws its error, which the worker reports
    return Status::Ok();
  });
}

// ---- Carried by the gloo group. ----

c10d::ProcessGroup& ProcessGroupOptcast::Gloo(const char* what) {
  TORCH_CHECK(gloo_, "the optcast backend carries ", what,
              " over a gloo group, and this process group was made without one; create it with "
              "torch.distributed.init_process_group(\"optcast\", ...) or new_group(backend=\"optcast\")");
  return *gloo_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                        std::vector<at::Tensor>& inputs,
                                                                        const c10d::AllgatherOptions& opts) {
  return Gloo("allgather_coalesced").allgather_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::GatherOptions& opts) {
  return Gloo("gather").gather(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::scatter(std::vector<at::Tensor>& outputs,
                                                            std::vector<std::vector<at::Tensor>>& inputs,
                                                            const c10d::ScatterOptions& opts) {
  return Gloo("scatter").scatter(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                  std::vector<int64_t>& output_split_sizes,
                                                                  std::vector<int64_t>& input_split_sizes,
                                                                  const c10d::AllToAllOptions& opts) {
  return Gloo("all_to_all_single").alltoall_base(output, input, output_split_sizes, input_split_sizes, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::alltoall(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllToAllOptions& opts) {
  c10d::ProcessGroup& gloo = Gloo("all_to_all");
  TORCH_CHECK(int(inputs.size()) == size_ && int(outputs.size()) == size_, "all_to_all wants ", size_, " input and ",
              size_, " output tensors, got ", inputs.size(), " and ", outputs.size());
  std::vector<at::Tensor> flat_in;
  std::vector<int64_t> in_splits, out_splits;
  for (int r = 0; r < size_; ++r) {
    CheckCpu(inputs[r], "all_to_all");
    CheckCpu(outputs[r], "all_to_all");
    TORCH_CHECK(
        inputs[r].scalar_type() == inputs[0].scalar_type() && outputs[r].scalar_type() == inputs[0].scalar_type(),
        "all_to_all wants every tensor of one dtype");
    flat_in.push_back(inputs[r].reshape({-1}));
    in_splits.push_back(inputs[r].numel());
    out_splits.push_back(outputs[r].numel());
  }
  at::Tensor in = at::cat(flat_in);
  int64_t total_out = 0;
  for (int64_t n : out_splits) total_out += n;
  at::Tensor out = at::empty({total_out}, in.options());
  // gloo takes the split vectors over (it moves from them): hand it copies.
  std::vector<int64_t> gloo_out_splits = out_splits, gloo_in_splits = in_splits;
  auto moved = gloo.alltoall_base(out, in, gloo_out_splits, gloo_in_splits, opts);
  // The copy into the caller's tensors waits for gloo on this group's worker thread.
  std::vector<at::Tensor> outs = outputs;
  return Enqueue(c10d::OpType::ALLTOALL, outputs, [moved, out, outs, out_splits](Communicator&) mutable {
    moved->wait();
    int64_t offset = 0;
    for (size_t r = 0; r < outs.size(); ++r) {
      outs[r].copy_(out.narrow(0, offset, out_splits[r]).view(outs[r].sizes()));
      offset += out_splits[r];
    }
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  return Gloo("send").send(tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  return Gloo("recv").recv(tensors, src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOptcast::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return Gloo("recv from any source").recvAnysource(tensors, tag);
}

void ProcessGroupOptcast::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  Gloo("monitored_barrier").monitoredBarrier(opts, wait_all_ranks);
}

}  // namespace optcast::torch_backend
