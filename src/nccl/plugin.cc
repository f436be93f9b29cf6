// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The exported plugin tables: ncclNetPlugin_v6..v12 and ncclCollNetPlugin_v6..v12. Each
// version is a thin adapter (argument widths, context arguments, properties layout) over the one
// implementation in net_tcp.cc and collnet.cc. No C++ exception crosses into NCCL: every entry
// point returns ncclInternalError instead.

#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "nccl/collnet.h"
#include "nccl/device_properties.h"
#include "nccl/forward.h"
#include "nccl/interfaces.h"
#include "nccl/logging.h"
#include "nccl/memory.h"
#include "nccl/nccl_abi.h"
#include "nccl/net_tcp.h"
#include "transport/kind.h"

#define OPTCAST_NCCL_EXPORT __attribute__((visibility("default")))

namespace optcast::nccl {
namespace {

constexpr const char* kPluginName = "Optcast";
constexpr int kMaxComms = 65536;
// The largest collective NCCL may hand us in one call; NCCL accepts (0, 1 TiB].
constexpr size_t kMaxCollBytes = kMaxNetSizeBytes;
constexpr size_t kMaxP2pBytes = kMaxNetSizeBytes;
constexpr int kMaxSgeParts = 1024;

void WarnNoThrow(const char* what, const char* why) noexcept {
  try {
    OPTCAST_NCCL_WARN("{} failed with an internal error: {}", what, why);
  } catch (...) {
  }
}

// Runs one entry point; an escaping exception becomes ncclInternalError.
template <typename F>
ncclResult_t Guard(const char* what, F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    WarnNoThrow(what, e.what());
  } catch (...) {
    WarnNoThrow(what, "unknown exception");
  }
  return ncclInternalError;
}

// An argument NCCL should never pass: a WARN naming the call and the value, then an error.
ncclResult_t BadArgument(const char* what, long long value) noexcept {
  try {
    OPTCAST_NCCL_WARN("{} called with {}; refused (an NCCL/plugin ABI mismatch?)", what, value);
  } catch (...) {
  }
  return ncclInvalidArgument;
}

// ---- properties, one template for every layout ----

uint64_t Guid(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

template <typename Props>
ncclResult_t FillProperties(int dev, bool coll, Props* props) {
  const auto& devices = Devices();
  if (props == nullptr || dev < 0 || dev >= static_cast<int>(devices.size())) {
    OPTCAST_NCCL_WARN("getProperties for device {}, but there are {} devices", dev, devices.size());
    return ncclInvalidArgument;
  }
  const DeviceProperties& d = PropertiesOf(static_cast<size_t>(dev));
  std::memset(props, 0, sizeof(*props));
  // CollNet device 0 is net device 0: the same name and PCI path make NCCL treat them as one NIC.
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = d.pci_path.empty() ? nullptr : const_cast<char*>(d.pci_path.c_str());
  props->guid = Guid(d.name);
  // Host memory (device_properties.h says when device memory would be added); NCCL stages GPU
  // buffers through host memory.
  props->ptrSupport = d.ptr_support;
  props->speed = d.speed_mbps;
  props->port = 0;
  props->latency = 0;
  props->maxComms = kMaxComms;
  props->maxRecvs = coll ? 1 : net::kMaxRecvs;
  if constexpr (requires { props->netDeviceType; }) {
    props->netDeviceType = NCCL_NET_DEVICE_HOST;
    props->netDeviceVersion = kNetDeviceInvalidVersion;
  }
  if constexpr (requires { props->regIsGlobal; }) {
    // A CollNet registration over libfabric lives in its communicator's fabric domains, so each
    // communicator needs its own; the TCP transports' registrations are not tied to any.
    transport::Kind kind = transport::Kind::kTcp;
    const bool ofi = transport::KindFromEnvironment(kind, &kind).ok() && kind == transport::Kind::kOfi;
    props->regIsGlobal = coll && ofi ? 0 : 1;
  }
  if constexpr (requires { props->forceFlush; }) props->forceFlush = 0;
  if constexpr (requires { props->vProps; }) {
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
  }
  if constexpr (requires { props->maxP2pBytes; }) {
    props->maxP2pBytes = kMaxP2pBytes;
    props->maxCollBytes = kMaxCollBytes;
  }
  if constexpr (requires { props->maxMultiRequestSize; }) props->maxMultiRequestSize = 1;
  if constexpr (requires { props->railId; }) {
    props->railId = kNetIdUndef;
    props->planeId = kNetIdUndef;
  }
  return ncclSuccess;
}

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

struct Context {
  uint64_t comm_id;
};

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
ncclResult_t RegMrDmaBuf(void* /*comm*/, void* /*data*/, size_t size, int type, uint64_t /*offset*/, int fd,
                         void** mhandle) {
  return Guard("regMrDmaBuf", [&] { return RegisterDmaBuf(size, type, fd, mhandle); });
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

// ---- per-version init ----

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
}  // namespace optcast::nccl

// ---- the exported tables ----

using namespace optcast::nccl;  // NOLINT: the tables below name many of its types and functions

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

namespace optcast::nccl {
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
}  // namespace optcast::nccl
