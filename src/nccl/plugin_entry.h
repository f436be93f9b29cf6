// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What the exported plugin tables (plugin_net.cc: ncclNetPlugin_v6..v12; plugin_collnet.cc:
// ncclCollNetPlugin_v6..v12) share: the exception guard every entry point runs in, the
// properties that one template fills for every layout, and the entry points both kinds of table
// hold. No C++ exception crosses into NCCL: every entry point returns ncclInternalError instead.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include "nccl/device_properties.h"
#include "nccl/interfaces.h"
#include "nccl/logging.h"
#include "nccl/nccl_abi.h"
#include "nccl/net_tcp.h"
#include "transport/kind.h"

#define OPTCAST_NCCL_EXPORT __attribute__((visibility("default")))

namespace optcast::nccl::plugin {

inline constexpr const char* kPluginName = "Optcast";
inline constexpr int kMaxComms = 65536;
// The largest collective NCCL may hand us in one call; NCCL accepts (0, 1 TiB].
inline constexpr size_t kMaxCollBytes = kMaxNetSizeBytes;
inline constexpr size_t kMaxP2pBytes = kMaxNetSizeBytes;

void WarnNoThrow(const char* what, const char* why) noexcept;

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
ncclResult_t BadArgument(const char* what, long long value) noexcept;

// ---- properties, one template for every layout ----

uint64_t Guid(const std::string& name);

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

// The context a v11+ init hands back (net and CollNet alike); finalize deletes it.
struct Context {
  uint64_t comm_id;
};

// ---- entry points both kinds of table hold ----

ncclResult_t RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);

}  // namespace optcast::nccl::plugin
