// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/nccl_driver/proxy_collnet.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <thread>

namespace optcast::tools::nccl_driver {

namespace {

using Clock = std::chrono::steady_clock;

std::string Bytes(size_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0) return fmt::format("{} MiB", n >> 20);
  if (n >= 1024 && n % 1024 == 0) return fmt::format("{} KiB", n >> 10);
  return fmt::format("{} B", n);
}

}  // namespace

bool NcclType(DataType dt, nccl::ncclDataType_t* out) {
  switch (dt) {
    case DataType::kInt8: *out = nccl::ncclInt8; return true;
    case DataType::kUInt8: *out = nccl::ncclUint8; return true;
    case DataType::kInt32: *out = nccl::ncclInt32; return true;
    case DataType::kUInt32: *out = nccl::ncclUint32; return true;
    case DataType::kInt64: *out = nccl::ncclInt64; return true;
    case DataType::kUInt64: *out = nccl::ncclUint64; return true;
    case DataType::kFloat16: *out = nccl::ncclFloat16; return true;
    case DataType::kFloat32: *out = nccl::ncclFloat32; return true;
    case DataType::kFloat64: *out = nccl::ncclFloat64; return true;
    case DataType::kBFloat16: *out = nccl::ncclBfloat16; return true;
  }
  return false;
}

bool NcclOp(RedOp op, nccl::ncclRedOp_t* out) {
  switch (op) {
    case RedOp::kSum: *out = nccl::ncclSum; return true;
    case RedOp::kProd: *out = nccl::ncclProd; return true;
    case RedOp::kMax: *out = nccl::ncclMax; return true;
    case RedOp::kMin: *out = nccl::ncclMin; return true;
    case RedOp::kAvg: return false;  // NCCL never hands avg to CollNet
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor: return false;  // NCCL has no bitwise reductions
  }
  return false;
}

Status ProxyCollNet::Failed(const std::string& what, ncclResult_t r) const {
  const std::string warning = LastPluginWarning();
  return InternalError(fmt::format("{} returned {}{}", what, ResultName(r),
                                   warning.empty() ? std::string() : "; the plugin said: " + warning));
}

Status ProxyCollNet::Create(const std::string& plugin_path, int rank, int nranks, const AllGatherFn& allgather,
                            const ProxyOptions& opts, std::unique_ptr<ProxyCollNet>* out) {
  if (opts.channels < 1 || opts.steps < 1 || opts.chunk_bytes == 0) {
    return InvalidArgument("the plugin path needs at least one channel, one step in flight and a chunk size > 0");
  }
  std::unique_ptr<CollNetTable> table;
  OPTCAST_RETURN_IF_ERROR(CollNetTable::Open(plugin_path, &table));
  std::unique_ptr<ProxyCollNet> p(new ProxyCollNet(std::move(table), opts));
  CollNetTable& t = *p->t_;
  const std::string v = "ncclCollNetPlugin_v" + std::to_string(t.version());
  if (ncclResult_t r = t.Init(PluginLogger); r != nccl::ncclSuccess) return p->Failed(v + " init", r);
  int ndev = 0;
  if (ncclResult_t r = t.Devices(&ndev); r != nccl::ncclSuccess) return p->Failed(v + " devices", r);
  if (ndev < 1) {
    // NCCL would leave CollNet off here without a word; say why.
    const std::string warning = LastPluginWarning();
    return UnavailableError(v + " reports no CollNet device, so NCCL would not use CollNet" +
                            (warning.empty() ? std::string() : " (the plugin said: " + warning + ")") +
                            ". Give the servers with --servers HOST:PORT,... (the plugin reads them from "
                            "OPTCAST_SERVERS)");
  }
  if (ncclResult_t r = t.GetProperties(0, &p->props_); r != nccl::ncclSuccess)
    return p->Failed(v + " getProperties", r);
  if ((p->props_.ptr_support & nccl::kPtrHost) == 0) {
    return UnavailableError(v + " does not take host memory (ptrSupport " + std::to_string(p->props_.ptr_support) +
                            "); this driver has only host buffers");
  }

  // NCCL listens once per device and all-gathers the handles through its bootstrap.
  std::string handle(nccl::kNetHandleMaxSize, '\0');
  void* listen = nullptr;
  if (ncclResult_t r = t.Listen(0, handle.data(), &listen); r != nccl::ncclSuccess) return p->Failed(v + " listen", r);
  std::vector<std::string> all;
  Status st = allgather(handle, &all);
  if (st.ok() && static_cast<int>(all.size()) != nranks) {
    st = InternalError(fmt::format("the handle exchange gave {} handles for {} ranks", all.size(), nranks));
  }
  for (size_t i = 0; st.ok() && i < all.size(); ++i) {
    if (all[i].size() != nccl::kNetHandleMaxSize) {
      st = InternalError(fmt::format("rank {} sent a listen handle of {} bytes", i, all[i].size()));
    }
  }
  if (!st.ok()) {
    (void)t.CloseListen(listen);
    return st;
  }
  std::vector<void*> handles;
  for (auto& h : all) handles.push_back(h.data());
  const ncclResult_t r = t.Connect(handles.data(), nranks, rank, listen, &p->coll_);
  (void)t.CloseListen(listen);  // NCCL closes it as soon as connect returns
  if (r != nccl::ncclSuccess || p->coll_ == nullptr) return p->Failed(v + " connect", r);
  *out = std::move(p);
  return Status::Ok();
}

ProxyCollNet::~ProxyCollNet() {
  if (coll_ != nullptr) {
    for (void* m : registered_) (void)t_->DeregMr(coll_, m);
    (void)t_->CloseColl(coll_);
  }
  (void)t_->Finalize();
}

Status ProxyCollNet::Register(void* data, size_t bytes, void** mhandle) {
  *mhandle = nullptr;
  if (ncclResult_t r = t_->RegMr(coll_, data, bytes, nccl::kPtrHost, mhandle); r != nccl::ncclSuccess) {
    return Failed(fmt::format("regMr of {} bytes", bytes), r);
  }
  registered_.push_back(*mhandle);
  return Status::Ok();
}

Status ProxyCollNet::Deregister(void* mhandle) {
  auto it = std::find(registered_.begin(), registered_.end(), mhandle);
  if (it == registered_.end()) return InvalidArgument("deregMr of a handle this driver did not register");
  registered_.erase(it);
  if (ncclResult_t r = t_->DeregMr(coll_, mhandle); r != nccl::ncclSuccess) return Failed("deregMr", r);
  return Status::Ok();
}

Status ProxyCollNet::AllReduce(void* send, void* recv, size_t count, DataType dt, RedOp op, void* send_mhandle,
                               void* recv_mhandle) {
  nccl::ncclDataType_t ndt;
  nccl::ncclRedOp_t nop;
  if (!NcclType(dt, &ndt)) return InvalidArgument(std::string("NCCL has no CollNet type for ") + DataTypeName(dt));
  if (!NcclOp(op, &nop)) {
    return InvalidArgument(std::string("NCCL never hands '") + RedOpName(op) +
                           "' to a CollNet plugin (avg is a sum through CollNet, divided on the GPU; NCCL has "
                           "no bitwise reductions); use -o sum");
  }
  const size_t esize = DataTypeSize(dt);
  const size_t step_count = std::max<size_t>(1, opts_.chunk_bytes / esize);
  const size_t nsteps = count == 0 ? 0 : (count + step_count - 1) / step_count;
  const size_t nch = static_cast<size_t>(opts_.channels);
  auto* s = static_cast<uint8_t*>(send);
  auto* d = static_cast<uint8_t*>(recv);

  struct InFlight {
    size_t step;
    void* request;
  };
  std::vector<std::deque<InFlight>> inflight(nch);
  size_t next = 0, completed = 0;
  auto last_progress = Clock::now();
  while (completed < nsteps) {
    bool progressed = false;
    // Issue in the collective order: step i belongs to channel i % C. A full channel, or a null
    // request, holds back every later step (NCCL lets no channel overtake another).
    while (next < nsteps) {
      auto& q = inflight[next % nch];
      if (q.size() >= static_cast<size_t>(opts_.steps)) break;
      const size_t first = next * step_count;
      const size_t n = std::min(step_count, count - first);
      void* req = nullptr;
      const ncclResult_t r =
          t_->IAllReduce(coll_, s + first * esize, d + first * esize, n, ndt, nop, send_mhandle, recv_mhandle, &req);
      if (r != nccl::ncclSuccess) {
        return Failed(
            fmt::format("iallreduce of step {} of {} ({} elements at element {})", next + 1, nsteps, n, first), r);
      }
      if (req == nullptr) {  // "call again later"
        ++null_requests_;
        break;
      }
      q.push_back({next, req});
      ++next;
      progressed = true;
    }
    // Test only the oldest request of each channel, as NCCL's proxy does.
    for (auto& q : inflight) {
      while (!q.empty()) {
        int done = 0, size = -1;
        const InFlight f = q.front();
        if (ncclResult_t r = t_->Test(f.request, &done, &size); r != nccl::ncclSuccess) {
          return Failed(fmt::format("test of step {} of {}", f.step + 1, nsteps), r);
        }
        if (!done) break;
        const size_t want = std::min(step_count, count - f.step * step_count) * esize;
        if (size != static_cast<int>(want)) {
          return InternalError(
              fmt::format("test of step {} reported {} bytes; the step has {}", f.step + 1, size, want));
        }
        q.pop_front();
        ++completed;
        progressed = true;
      }
    }
    if (progressed) {
      last_progress = Clock::now();
    } else {
      if (Clock::now() - last_progress > opts_.timeout) {
        return TimeoutError(fmt::format("no CollNet request completed for {} ms ({} of {} steps done)",
                                        opts_.timeout.count(), completed, nsteps));
      }
      if (opts_.idle_sleep.count() > 0) {
        std::this_thread::sleep_for(opts_.idle_sleep);
      } else {
        std::this_thread::yield();  // NCCL's proxy yields when a pass found nothing to do
      }
    }
  }
  return Status::Ok();
}

std::string ProxyCollNet::Describe() const {
  std::string path = t_->path();
  if (auto slash = path.rfind('/'); slash != std::string::npos) path = path.substr(slash + 1);
  return fmt::format(
      "{} (ncclCollNetPlugin_v{}, device {}), {} channel(s) on one collComm, {} steps, {} in flight per channel, {}",
      path, t_->version(), props_.name, opts_.channels, Bytes(opts_.chunk_bytes), opts_.steps,
      opts_.idle_sleep.count() > 0 ? fmt::format("idle passes sleep {} us", opts_.idle_sleep.count())
                                   : std::string("idle passes yield"));
}

}  // namespace optcast::tools::nccl_driver
