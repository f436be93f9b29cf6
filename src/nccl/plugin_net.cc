// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The exported point-to-point tables, ncclNetPlugin_v6..v12. Each version is a thin adapter
// (argument widths, context arguments, properties layout) over the one implementation in
// net_tcp.cc, or hands NCCL the table of the plugin OPTCAST_NET_PLUGIN names (forward.cc).

#include <mutex>
#include <new>

#include "nccl/forward.h"
#include "nccl/memory.h"
#include "nccl/plugin_entry.h"

namespace optcast::nccl::plugin {
namespace {

// ---- OPTCAST_NET_PLUGIN forwarding ----

// Decides once per ABI version whether NCCL's point-to-point calls go to another plugin. When
// they do, the other plugin's table is copied over ours (all but the name) right after its
// init succeeds, so NCCL, which reads function pointers from our table after init, calls it
// directly with no per-call cost. `call_init(table)` runs that table's init with NCCL's
// arguments. Returns true when `*result` holds the forwarded init's answer.
template <typename Table, typename CallInit>
bool InitForwarded(int version, Table* self, CallInit&& call_init, ncclResult_t* result) {
  static std::once_flag decided;
  static bool forwarding = false;
  bool first = false;
  std::call_once(decided, [&] {
    first = true;
    const auto* target = static_cast<const Table*>(ForwardNetTable(version, self));
    if (target == nullptr || target->init == nullptr) return;
    const ncclResult_t r = call_init(target);
    if (r != ncclSuccess) {
      OPTCAST_NCCL_WARN(
          "the net plugin named by OPTCAST_NET_PLUGIN failed to initialize (error {}); using Optcast's "
          "TCP network for point-to-point",
          static_cast<int>(r));
      return;
    }
    const char* name = self->name;
    *self = *target;
    self->name = name;
    forwarding = true;
    *result = ncclSuccess;
    OPTCAST_NCCL_INFO(NCCL_INIT | NCCL_NET,
                      "point-to-point traffic goes to {} (ncclNetPlugin_v{}); CollNet stays "
                      "with Optcast",
                      target->name ? target->name : "?", version);
  });
  if (!forwarding) return false;
  // Our table now holds the other plugin's functions; a caller that kept our old init pointer
  // still reaches it.
  if (!first) *result = call_init(self);
  return true;
}

// ---- point-to-point entry points shared by the versions ----

ncclResult_t NetInitOwn(ncclDebugLogger_t logger) {
  SetLogger(logger);
  return Guard("init", [] {
    const ncclResult_t r = net::Init();
    OPTCAST_NCCL_INFO(NCCL_INIT | NCCL_NET, "net plugin ready: {} device(s), TCP", Devices().size());
    return r;
  });
}
ncclResult_t NetDevices(int* ndev) {
  return Guard("devices", [&] { return net::Devices(ndev); });
}
template <typename Props>
ncclResult_t NetGetProperties(int dev, Props* props) {
  return Guard("getProperties", [&] { return FillProperties(dev, false, props); });
}
ncclResult_t NetListen(int dev, void* handle, void** listen_comm) {
  return Guard("listen", [&] { return net::Listen(dev, handle, listen_comm); });
}
ncclResult_t NetConnect(int dev, void* handle, void** send_comm) {
  return Guard("connect", [&] { return net::Connect(dev, handle, send_comm); });
}
ncclResult_t NetAccept(void* listen_comm, void** recv_comm) {
  return Guard("accept", [&] { return net::Accept(listen_comm, recv_comm); });
}
ncclResult_t RegMr(void* /*comm*/, void* data, size_t size, int type, void** mhandle) {
  return Guard("regMr", [&] { return RegisterMemory(data, size, type, mhandle); });
}
ncclResult_t RegMrInt(void* comm, void* data, int size, int type, void** mhandle) {
  if (size < 0) return BadArgument("regMr: size", size);
  return RegMr(comm, data, static_cast<size_t>(size), type, mhandle);
}
ncclResult_t DeregMr(void* /*comm*/, void* mhandle) {
  return Guard("deregMr", [&] { return DeregisterMemory(mhandle); });
}
ncclResult_t NetIsend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return Guard("isend", [&] { return net::Isend(send_comm, data, size, tag, mhandle, request); });
}
ncclResult_t NetIsendInt(void* send_comm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) return BadArgument("isend: size", size);
  return NetIsend(send_comm, data, static_cast<size_t>(size), tag, mhandle, request);
}
ncclResult_t NetIrecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  return Guard("irecv", [&] { return net::Irecv(recv_comm, n, data, sizes, tags, mhandles, request); });
}
ncclResult_t NetIrecvInt(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  if (n < 1 || n > net::kMaxRecvs) return BadArgument("irecv: receive count", n);
  size_t wide[net::kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return BadArgument("irecv: size", sizes[i]);
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return NetIrecv(recv_comm, n, data, wide, tags, mhandles, request);
}
ncclResult_t NetIflush(void* recv_comm, int /*n*/, void** /*data*/, int* /*sizes*/, void** /*mhandles*/,
                       void** request) {
  return Guard("iflush", [&] { return net::Iflush(recv_comm, request); });
}
ncclResult_t NetTest(void* request, int* done, int* sizes) {
  return Guard("test", [&] { return net::Test(request, done, sizes); });
}
ncclResult_t NetCloseSend(void* comm) {
  return Guard("closeSend", [&] { return net::CloseSend(comm); });
}
ncclResult_t NetCloseRecv(void* comm) {
  return Guard("closeRecv", [&] { return net::CloseRecv(comm); });
}
ncclResult_t NetCloseListen(void* comm) {
  return Guard("closeListen", [&] { return net::CloseListen(comm); });
}
ncclResult_t NetFinalize(void* ctx) {
  delete static_cast<Context*>(ctx);
  return ncclSuccess;
}

// Per-version shapes of the same calls.
ncclResult_t NetConnectDev(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v7_t** /*dev_comm*/) {
  return NetConnect(dev, handle, send_comm);
}
ncclResult_t NetAcceptDev(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v7_t** /*dev_comm*/) {
  return NetAccept(listen_comm, recv_comm);
}
ncclResult_t NetConnectV10(int dev, ncclNetCommConfig_v10_t* /*config*/, void* handle, void** send_comm,
                           ncclNetDeviceHandle_v10_t** /*dev_comm*/) {
  return NetConnect(dev, handle, send_comm);
}
ncclResult_t NetIsendP(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* /*phandle*/,
                       void** request) {
  return NetIsend(send_comm, data, size, tag, mhandle, request);
}
ncclResult_t NetIrecvP(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                       void** /*phandles*/, void** request) {
  return NetIrecv(recv_comm, n, data, sizes, tags, mhandles, request);
}
ncclResult_t NetListenCtx(void* /*ctx*/, int dev, void* handle, void** listen_comm) {
  return NetListen(dev, handle, listen_comm);
}
ncclResult_t NetConnectCtx(void* /*ctx*/, int dev, void* handle, void** send_comm,
                           ncclNetDeviceHandle_v11_t** /*dev_comm*/) {
  return NetConnect(dev, handle, send_comm);
}

// ---- per-version init ----

// Defined after the tables: each init names its own table, which it may overwrite.
ncclResult_t NetInitV6(ncclDebugLogger_t logger);
ncclResult_t NetInitV7(ncclDebugLogger_t logger);
ncclResult_t NetInitV8(ncclDebugLogger_t logger);
ncclResult_t NetInitV9(ncclDebugLogger_t logger);
ncclResult_t NetInitV10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof);
ncclResult_t NetInitV11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t logger,
                        ncclProfilerCallback_t prof);
ncclResult_t NetInitV12(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logger,
                        ncclProfilerCallback_t prof);

}  // namespace
}  // namespace optcast::nccl::plugin

// ---- the exported tables ----

using namespace optcast::nccl;          // NOLINT: the tables below name many of its types
using namespace optcast::nccl::plugin;  // NOLINT: and the entry points

extern "C" {

OPTCAST_NCCL_EXPORT ncclNet_v6_t ncclNetPlugin_v6 = {
    .name = kPluginName,
    .init = NetInitV6,
    .devices = NetDevices,
    .getProperties = NetGetProperties<ncclNetProperties_v6_t>,
    .listen = NetListen,
    .connect = NetConnect,
    .accept = NetAccept,
    .regMr = RegMrInt,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = DeregMr,
    .isend = NetIsendInt,
    .irecv = NetIrecvInt,
    .iflush = NetIflush,
    .test = NetTest,
    .closeSend = NetCloseSend,
    .closeRecv = NetCloseRecv,
    .closeListen = NetCloseListen,
};

OPTCAST_NCCL_EXPORT ncclNet_v7_t ncclNetPlugin_v7 = {
    .name = kPluginName,
    .init = NetInitV7,
    .devices = NetDevices,
    .getProperties = NetGetProperties<ncclNetProperties_v7_t>,
    .listen = NetListen,
    .connect = NetConnectDev,
    .accept = NetAcceptDev,
    .regMr = RegMrInt,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = DeregMr,
    .isend = NetIsendInt,
    .irecv = NetIrecvInt,
    .iflush = NetIflush,
    .test = NetTest,
    .closeSend = NetCloseSend,
    .closeRecv = NetCloseRecv,
    .closeListen = NetCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};

OPTCAST_NCCL_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = kPluginName,
    .init = NetInitV8,
    .devices = NetDevices,
    .getProperties = NetGetProperties<ncclNetProperties_v8_t>,
    .listen = NetListen,
    .connect = NetConnectDev,
    .accept = NetAcceptDev,
    .regMr = RegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = DeregMr,
    .isend = NetIsendInt,
    .irecv = NetIrecvInt,
    .iflush = NetIflush,
    .test = NetTest,
    .closeSend = NetCloseSend,
    .closeRecv = NetCloseRecv,
    .closeListen = NetCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};

OPTCAST_NCCL_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = kPluginName,
    .init = NetInitV9,
    .devices = NetDevices,
    .getProperties = NetGetProperties<ncclNetProperties_v9_t>,
    .listen = NetListen,
    .connect = NetConnectDev,
    .accept = NetAcceptDev,
    .regMr = RegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = DeregMr,
    .isend = NetIsend,
    .irecv = NetIrecv,
    .iflush = NetIflush,
    .test = NetTest,
    .closeSend = NetCloseSend,
    .closeRecv = NetCloseRecv,
    .closeListen = NetCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

OPTCAST_NCCL_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = kPluginName,
    .init = NetInitV10,
    .devices = NetDevices,
    .getProperties = NetGetProperties<ncclNetProperties_v10_t>,
    .listen = NetListen,
    .connect = NetConnectV10,
    .accept = NetAcceptDev,
    .regMr = RegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = DeregMr,
    .isend = NetIsendP,
    .irecv = NetIrecvP,
    .iflush = NetIflush,
    .test = NetTest,
    .closeSend = NetCloseSend,
    .closeRecv = NetCloseRecv,
    .closeListen = NetCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

OPTCAST_NCCL_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = kPluginName,
    .init = NetInitV11,
    .devices = NetDevices,
    .getProperties = NetGetProperties<ncclNetProperties_v11_t>,
    .listen = NetListenCtx,
    .connect = NetConnectCtx,
    .accept = NetAcceptDev,
    .regMr = RegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = DeregMr,
    .isend = NetIsendP,
    .irecv = NetIrecvP,
    .iflush = NetIflush,
    .test = NetTest,
    .closeSend = NetCloseSend,
    .closeRecv = NetCloseRecv,
    .closeListen = NetCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = NetFinalize,
    .setNetAttr = nullptr,
};

OPTCAST_NCCL_EXPORT ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = kPluginName,
    .init = NetInitV12,
    .devices = NetDevices,
    .getProperties = NetGetProperties<ncclNetProperties_v12_t>,
    .listen = NetListenCtx,
    .connect = NetConnectCtx,
    .accept = NetAcceptDev,
    .regMr = RegMr,
    .regMrDmaBuf = RegMrDmaBuf,
    .deregMr = DeregMr,
    .isend = NetIsendP,
    .irecv = NetIrecvP,
    .iflush = NetIflush,
    .test = NetTest,
    .closeSend = NetCloseSend,
    .closeRecv = NetCloseRecv,
    .closeListen = NetCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = NetFinalize,
    .setNetAttr = nullptr,
};

}  // extern "C"

namespace optcast::nccl::plugin {
namespace {

// Each init first offers the call to the OPTCAST_NET_PLUGIN library, then initializes ours.
template <typename Table, typename CallInit>
ncclResult_t NetInit(int version, Table* self, ncclDebugLogger_t logger, CallInit&& call_init) {
  SetLogger(logger);
  return Guard("init", [&] {
    ncclResult_t r = ncclSuccess;
    if (InitForwarded(version, self, call_init, &r)) return r;
    return NetInitOwn(logger);
  });
}

ncclResult_t NetInitV6(ncclDebugLogger_t logger) {
  return NetInit(6, &ncclNetPlugin_v6, logger, [&](const ncclNet_v6_t* t) { return t->init(logger); });
}
ncclResult_t NetInitV7(ncclDebugLogger_t logger) {
  return NetInit(7, &ncclNetPlugin_v7, logger, [&](const ncclNet_v7_t* t) { return t->init(logger); });
}
ncclResult_t NetInitV8(ncclDebugLogger_t logger) {
  return NetInit(8, &ncclNetPlugin_v8, logger, [&](const ncclNet_v8_t* t) { return t->init(logger); });
}
ncclResult_t NetInitV9(ncclDebugLogger_t logger) {
  return NetInit(9, &ncclNetPlugin_v9, logger, [&](const ncclNet_v9_t* t) { return t->init(logger); });
}
ncclResult_t NetInitV10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  return NetInit(10, &ncclNetPlugin_v10, logger, [&](const ncclNet_v10_t* t) { return t->init(logger, prof); });
}
ncclResult_t NetInitV11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t logger,
                        ncclProfilerCallback_t prof) {
  // v11+: our own context only records the communicator; the forwarded plugin sets its own.
  if (ctx != nullptr) *ctx = nullptr;
  const ncclResult_t r = NetInit(11, &ncclNetPlugin_v11, logger,
                                 [&](const ncclNet_v11_t* t) { return t->init(ctx, comm_id, config, logger, prof); });
  const bool forwarded = ncclNetPlugin_v11.init != NetInitV11;
  if (r == ncclSuccess && !forwarded && ctx != nullptr) *ctx = new (std::nothrow) Context{comm_id};
  return r;
}
ncclResult_t NetInitV12(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logger,
                        ncclProfilerCallback_t prof) {
  if (ctx != nullptr) *ctx = nullptr;
  const ncclResult_t r = NetInit(12, &ncclNetPlugin_v12, logger,
                                 [&](const ncclNet_v12_t* t) { return t->init(ctx, comm_id, config, logger, prof); });
  const bool forwarded = ncclNetPlugin_v12.init != NetInitV12;
  if (r == ncclSuccess && !forwarded && ctx != nullptr) *ctx = new (std::nothrow) Context{comm_id};
  return r;
}

}  // namespace
}  // namespace optcast::nccl::plugin
