// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The exported CollNet tables, ncclCollNetPlugin_v6..v12. Each version is a thin adapter
// (argument widths, context arguments, properties layout, scatter-gather element type) over the
// one implementation in collnet.cc.

#include <new>
#include <vector>

#include "nccl/collnet.h"
#include "nccl/plugin_entry.h"

namespace optcast::nccl::plugin {
namespace {

constexpr int kMaxSgeParts = 1024;

// ---- CollNet entry points shared by the versions ----

ncclResult_t CollInitOwn(ncclDebugLogger_t logger) {
  SetLogger(logger);
  return Guard("collnet init", [] {
    (void)Devices();
    return collnet::Init();
  });
}
ncclResult_t CollInitCtx(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  const ncclResult_t r = CollInitOwn(logger);
  if (r == ncclSuccess && ctx != nullptr) *ctx = new (std::nothrow) Context{comm_id};
  return r;
}
ncclResult_t CollDevices(int* ndev) {
  return Guard("collnet devices", [&] {
    *ndev = collnet::DeviceCount();
    return ncclSuccess;
  });
}
template <typename Props>
ncclResult_t CollGetProperties(int dev, Props* props) {
  return Guard("collnet getProperties", [&] {
    if (dev != 0) return BadArgument("collnet getProperties: device (there is one, 0)", dev);
    return FillProperties(0, true, props);
  });
}
ncclResult_t CollRegMr(void* coll_comm, void* data, size_t size, int type, void** mhandle) {
  return Guard("collnet regMr", [&] { return collnet::RegMr(coll_comm, data, size, type, mhandle); });
}
ncclResult_t CollRegMrInt(void* coll_comm, void* data, int size, int type, void** mhandle) {
  if (size < 0) return BadArgument("collnet regMr: size", size);
  return CollRegMr(coll_comm, data, static_cast<size_t>(size), type, mhandle);
}
ncclResult_t CollDeregMr(void* coll_comm, void* mhandle) {
  return Guard("collnet deregMr", [&] { return collnet::DeregMr(coll_comm, mhandle); });
}
ncclResult_t CollListen(int dev, void* handle, void** listen_comm) {
  return Guard("collnet listen", [&] { return collnet::Listen(dev, handle, listen_comm); });
}
ncclResult_t CollListenCtx(void* /*ctx*/, int dev, void* handle, void** listen_comm) {
  return CollListen(dev, handle, listen_comm);
}
ncclResult_t CollConnect(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm) {
  return Guard("collnet connect", [&] { return collnet::Connect(handles, nranks, rank, listen_comm, coll_comm); });
}
ncclResult_t CollReduceSupport(ncclDataType_t dtype, ncclRedOp_t op, int* supported) {
  return Guard("collnet reduceSupport", [&] { return collnet::ReduceSupport(dtype, op, supported); });
}
ncclResult_t CollIallreduce(void* coll_comm, void* send, void* recv, size_t count, ncclDataType_t dtype, ncclRedOp_t op,
                            void* /*send_mhandle*/, void* /*recv_mhandle*/, void** request) {
  return Guard("collnet iallreduce",
               [&] { return collnet::IAllReduce(coll_comm, send, recv, count, dtype, op, request); });
}
ncclResult_t CollIallreduceInt(void* coll_comm, void* send, void* recv, int count, ncclDataType_t dtype, ncclRedOp_t op,
                               void* send_mhandle, void* recv_mhandle, void** request) {
  if (count < 0) return BadArgument("collnet iallreduce: count", count);
  return CollIallreduce(coll_comm, send, recv, static_cast<size_t>(count), dtype, op, send_mhandle, recv_mhandle,
                        request);
}

template <typename SgeT>
bool Widen(const SgeT* parts, int n, std::vector<collnet::Sge>* out) {
  if (parts == nullptr || n < 1 || n > kMaxSgeParts) return false;
  out->resize(n);
  for (int i = 0; i < n; ++i) (*out)[i] = {parts[i].mhandle, parts[i].address, static_cast<size_t>(parts[i].size)};
  return true;
}

template <typename SgeT>
ncclResult_t CollIallgather(void* coll_comm, void* send, int nparts, SgeT* recv_parts, size_t bytes_per_rank,
                            size_t window_offset, size_t window_bytes, void* /*send_mhandle*/, void** request) {
  return Guard("collnet iallgather", [&] {
    std::vector<collnet::Sge> parts;
    if (!Widen(recv_parts, nparts, &parts)) return BadArgument("collnet iallgather: part count", nparts);
    return collnet::IAllGather(coll_comm, send, parts.data(), nparts, bytes_per_rank, window_offset, window_bytes,
                               request);
  });
}

template <typename SgeT>
ncclResult_t CollIreducescatter(void* coll_comm, int nparts, SgeT* send_parts, void* recv, size_t bytes_per_rank,
                                size_t window_offset, size_t window_bytes, ncclDataType_t dtype, ncclRedOp_t op,
                                void* /*recv_mhandle*/, void** request) {
  return Guard("collnet ireducescatter", [&] {
    std::vector<collnet::Sge> parts;
    if (!Widen(send_parts, nparts, &parts)) return BadArgument("collnet ireducescatter: part count", nparts);
    return collnet::IReduceScatter(coll_comm, parts.data(), nparts, recv, bytes_per_rank, window_offset, window_bytes,
                                   dtype, op, request);
  });
}

ncclResult_t CollIflush(void* /*coll_comm*/, void* /*data*/, int /*size*/, void* /*mhandle*/, void** request) {
  return Guard("collnet iflush", [&] { return collnet::Iflush(request); });
}
ncclResult_t CollTest(void* request, int* done, int* size) {
  return Guard("collnet test", [&] { return collnet::Test(request, done, size); });
}
ncclResult_t CollClose(void* coll_comm) {
  return Guard("collnet closeColl", [&] { return collnet::CloseColl(coll_comm); });
}
ncclResult_t CollCloseListen(void* listen_comm) {
  return Guard("collnet closeListen", [&] { return collnet::CloseListen(listen_comm); });
}
ncclResult_t CollFinalize(void* ctx) {
  delete static_cast<Context*>(ctx);
  return ncclSuccess;
}

}  // namespace
}  // namespace optcast::nccl::plugin

// ---- the exported tables ----

using namespace optcast::nccl;          // NOLINT: the tables below name many of its types
using namespace optcast::nccl::plugin;  // NOLINT: and the entry points

extern "C" {

OPTCAST_NCCL_EXPORT ncclCollNet_v6_t ncclCollNetPlugin_v6 = {
    .name = kPluginName,
    .init = CollInitOwn,
    .devices = CollDevices,
    .getProperties = CollGetProperties<ncclNetProperties_v6_t>,
    .listen = CollListen,
    .connect = CollConnect,
    .reduceSupport = CollReduceSupport,
    .regMr = CollRegMrInt,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = CollDeregMr,
    .iallreduce = CollIallreduceInt,
    .iflush = CollIflush,
    .test = CollTest,
    .closeColl = CollClose,
    .closeListen = CollCloseListen,
};

OPTCAST_NCCL_EXPORT ncclCollNet_v7_t ncclCollNetPlugin_v7 = {
    .name = kPluginName,
    .init = CollInitOwn,
    .devices = CollDevices,
    .getProperties = CollGetProperties<ncclNetProperties_v7_t>,
    .listen = CollListen,
    .connect = CollConnect,
    .reduceSupport = CollReduceSupport,
    .regMr = CollRegMrInt,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = CollDeregMr,
    .iallreduce = CollIallreduceInt,
    .iflush = CollIflush,
    .test = CollTest,
    .closeColl = CollClose,
    .closeListen = CollCloseListen,
};

OPTCAST_NCCL_EXPORT ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    .name = kPluginName,
    .init = CollInitOwn,
    .devices = CollDevices,
    .getProperties = CollGetProperties<ncclNetProperties_v8_t>,
    .listen = CollListen,
    .connect = CollConnect,
    .reduceSupport = CollReduceSupport,
    .regMr = CollRegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = CollDeregMr,
    .iallreduce = CollIallreduceInt,
    .iallgather = CollIallgather<ncclNetSGE_v8_t>,
    .ireducescatter = CollIreducescatter<ncclNetSGE_v8_t>,
    .iflush = CollIflush,
    .test = CollTest,
    .closeColl = CollClose,
    .closeListen = CollCloseListen,
};

OPTCAST_NCCL_EXPORT ncclCollNet_v9_t ncclCollNetPlugin_v9 = {
    .name = kPluginName,
    .init = CollInitOwn,
    .devices = CollDevices,
    .getProperties = CollGetProperties<ncclNetProperties_v9_t>,
    .listen = CollListen,
    .connect = CollConnect,
    .reduceSupport = CollReduceSupport,
    .regMr = CollRegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = CollDeregMr,
    .iallreduce = CollIallreduce,
    .iallgather = CollIallgather<ncclNetSGE_v9_t>,
    .ireducescatter = CollIreducescatter<ncclNetSGE_v9_t>,
    .iflush = CollIflush,
    .test = CollTest,
    .closeColl = CollClose,
    .closeListen = CollCloseListen,
    .makeVDevice = nullptr,
};

OPTCAST_NCCL_EXPORT ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
    .name = kPluginName,
    .init = CollInitOwn,
    .devices = CollDevices,
    .getProperties = CollGetProperties<ncclNetProperties_v10_t>,
    .listen = CollListen,
    .connect = CollConnect,
    .reduceSupport = CollReduceSupport,
    .regMr = CollRegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = CollDeregMr,
    .iallreduce = CollIallreduce,
    .iallgather = CollIallgather<ncclNetSGE_v10_t>,
    .ireducescatter = CollIreducescatter<ncclNetSGE_v10_t>,
    .iflush = CollIflush,
    .test = CollTest,
    .closeColl = CollClose,
    .closeListen = CollCloseListen,
    .makeVDevice = nullptr,
};

OPTCAST_NCCL_EXPORT ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    .name = kPluginName,
    .init = CollInitCtx,
    .devices = CollDevices,
    .getProperties = CollGetProperties<ncclNetProperties_v11_t>,
    .listen = CollListenCtx,
    .connect = CollConnect,
    .reduceSupport = CollReduceSupport,
    .regMr = CollRegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = CollDeregMr,
    .iallreduce = CollIallreduce,
    .iallgather = CollIallgather<ncclNetSGE_v11_t>,
    .ireducescatter = CollIreducescatter<ncclNetSGE_v11_t>,
    .iflush = CollIflush,
    .test = CollTest,
    .closeColl = CollClose,
    .closeListen = CollCloseListen,
    .makeVDevice = nullptr,
    .finalize = CollFinalize,
};

OPTCAST_NCCL_EXPORT ncclCollNet_v12_t ncclCollNetPlugin_v12 = {
    .name = kPluginName,
    .init = CollInitCtx,
    .devices = CollDevices,
    .getProperties = CollGetProperties<ncclNetProperties_v12_t>,
    .listen = CollListenCtx,
    .connect = CollConnect,
    .reduceSupport = CollReduceSupport,
    .regMr = CollRegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = CollDeregMr,
    .iallreduce = CollIallreduce,
    .iallgather = CollIallgather<ncclNetSGE_v12_t>,
    .ireducescatter = CollIreducescatter<ncclNetSGE_v12_t>,
    .iflush = CollIflush,
    .test = CollTest,
    .closeColl = CollClose,
    .closeListen = CollCloseListen,
    .makeVDevice = nullptr,
    .finalize = CollFinalize,
};

}  // extern "C"
