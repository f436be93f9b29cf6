// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A CollNet plugin driven the way NCCL 2.28's proxy drives it (src/transport/coll_net.cc), for
// host buffers: init -> devices -> getProperties -> listen once -> the listen handles
// all-gathered among the ranks -> connect -> closeListen; one collComm shared by every channel;
// buffers regMr'ed as NCCL_PTR_HOST. An AllReduce is cut into steps of the chunk size; channel c
// takes steps c, c + C, c + 2C, ... (C channels), at most NCCL_STEPS (8) in flight per channel.
// Requests are issued in NCCL's enforced collective order (step t of channel c only after step
// t of channel c - 1), which keeps every rank's sequence of calls on the shared collComm the
// same; a null request means "call again later" (the same step, next pass), and only the oldest
// request of each channel is tested.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optcast/types.h"
#include "tools/nccl_driver/collnet_plugin.h"

namespace optcast::tools::nccl_driver {

struct ProxyOptions {
  int channels = 2;
  size_t chunk_bytes = 512 << 10;  // NCCL's CollNet chunk at the default buffer size
  int steps = 8;                   // NCCL_STEPS: requests in flight per channel
  // A collective with no request completing for this long fails (the plugin's own
  // OPTCAST_TIMEOUT_MS normally reports first, with its reason).
  std::chrono::milliseconds timeout{60000};
  // What a pass that completed and issued nothing does next. Zero: sched_yield, as NCCL's proxy
  // thread does on a host where it has a core to itself. Above zero: sleep that long, for hosts
  // that share cores (the emulated cluster runs 16 hosts on a few), where a spinning proxy takes
  // the CPU that carries the other hosts' traffic.
  std::chrono::microseconds idle_sleep{0};
};

// NCCL's bootstrap all-gather: this rank's bytes in, every rank's in rank order out.
using AllGatherFn = std::function<Status(const std::string& mine, std::vector<std::string>* all)>;

class ProxyCollNet {
 public:
  // Loads the plugin at `plugin_path`, initializes it with PluginLogger and connects this rank's
  // collComm. The plugin takes its servers and settings from the environment (OPTCAST_SERVERS,
  // OPTCAST_TIMEOUT_MS, ...), so set them first.
  static Status Create(const std::string& plugin_path, int rank, int nranks, const AllGatherFn& allgather,
                       const ProxyOptions& opts, std::unique_ptr<ProxyCollNet>* out);
  // deregMr of what is still registered, closeColl, finalize.
  ~ProxyCollNet();
  ProxyCollNet(const ProxyCollNet&) = delete;
  ProxyCollNet& operator=(const ProxyCollNet&) = delete;

  // regMr of host memory; the handle serves any part of [data, data + bytes).
  Status Register(void* data, size_t bytes, void** mhandle);
  Status Deregister(void* mhandle);

  // One AllReduce of `count` elements through the plugin, staged as described above. Returns
  // when every step's request has completed.
  // Types and operators NCCL has no CollNet form for (see NcclType/NcclOp) are refused.
  Status AllReduce(void* send, void* recv, size_t count, DataType dt, RedOp op, void* send_mhandle, void* recv_mhandle);

  // "libnccl-net-optcast.so (ncclCollNetPlugin_v12, device eth0), 2 channel(s) on one collComm, ..."
  std::string Describe() const;
  // Requests the plugin answered with "call again later" so far.
  uint64_t null_requests() const { return null_requests_; }

 private:
  ProxyCollNet(std::unique_ptr<CollNetTable> table, const ProxyOptions& opts) : t_(std::move(table)), opts_(opts) {}
  Status Failed(const std::string& what, ncclResult_t r) const;

  std::unique_ptr<CollNetTable> t_;
  ProxyOptions opts_;
  CollNetProperties props_;
  void* coll_ = nullptr;
  std::vector<void*> registered_;
  uint64_t null_requests_ = 0;
};

// The NCCL numbering of Optcast's types and operators; false where NCCL has none for CollNet
// (avg: NCCL sums through CollNet and divides on the GPU).
bool NcclType(DataType dt, nccl::ncclDataType_t* out);
bool NcclOp(RedOp op, nccl::ncclRedOp_t* out);

}  // namespace optcast::tools::nccl_driver
