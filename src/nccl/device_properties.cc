// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "nccl/device_properties.h"

#include <memory>
#include <mutex>
#include <vector>

#include "nccl/logging.h"
#include "nccl/nccl_abi.h"
#include "transport/kind.h"

namespace optcast::nccl {

DeviceProperties DescribeDevice(const NetInterface& itf, const std::optional<transport::FabricDeviceInfo>& fabric,
                                bool data_path_takes_device_memory) {
  DeviceProperties p;
  p.name = itf.name;
  p.pci_path = itf.pci_path;
  p.speed_mbps = itf.speed_mbps;
  p.ptr_support = kPtrHost;
  if (!fabric) return p;
  if (!fabric->name.empty()) p.name = fabric->name;
  if (!fabric->pci_path.empty()) p.pci_path = fabric->pci_path;
  if (fabric->speed_mbps > 0) p.speed_mbps = fabric->speed_mbps;
  if (fabric->hmem && data_path_takes_device_memory) p.ptr_support |= kPtrCuda;
  return p;
}

namespace {

std::optional<transport::FabricDeviceInfo> FabricDevice(const NetInterface& itf) {
  transport::Kind kind = transport::Kind::kTcp;
  if (!transport::KindFromEnvironment(transport::Kind::kTcp, &kind).ok() || kind != transport::Kind::kOfi) {
    return std::nullopt;
  }
  transport::FabricDeviceInfo device;
  const Status st = transport::ProbeFabricDevice(transport::RequestedFabricProvider(), itf.address, &device);
  if (!st.ok()) {
    OPTCAST_NCCL_WARN("device {}: reporting the interface's properties, since the fabric did not open: {}", itf.name,
                      st.message());
    return std::nullopt;
  }
  return device;
}

}  // namespace

const DeviceProperties& PropertiesOf(size_t dev) {
  static std::once_flag once;
  static std::vector<DeviceProperties> props;
  std::call_once(once, [] {
    for (const NetInterface& itf : Devices()) {
      const auto fabric = FabricDevice(itf);
      props.push_back(DescribeDevice(itf, fabric, kDataPathTakesDeviceMemory));
      const DeviceProperties& p = props.back();
      if (fabric) {
        OPTCAST_NCCL_INFO(NCCL_INIT | NCCL_NET, "device {}: fabric {} ({}) speed {} Mbit/s pci {}{}", itf.name, p.name,
                          fabric->provider, p.speed_mbps, p.pci_path.empty() ? "none" : p.pci_path,
                          fabric->hmem ? ", provider moves GPU memory (FI_HMEM; the plugin takes host memory)" : "");
      }
    }
  });
  return props.at(dev);
}

}  // namespace optcast::nccl
