// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What getProperties reports for a device, for the net plugin and the CollNet plugin alike: NCCL
// pairs CollNet device 0 with net device 0 by name and PCI path, so both take them from here.

#include <optional>
#include <string>

#include "nccl/interfaces.h"
#include "transport/fabric_info.h"

namespace optcast::nccl {

struct DeviceProperties {
  std::string name;      // NIC name NCCL matches into its topology
  std::string pci_path;  // empty when there is no PCI device
  int speed_mbps = 0;
  int ptr_support = 0;  // NCCL_PTR_* bits
};

// The interface's own values, or with the ofi transport the fabric device's where libfabric
// knows them (device name, PCI address, link speed), the interface's where it does not (the tcp
// provider on loopback has no PCI device). NCCL_PTR_CUDA only when the provider moves device
// memory (FI_HMEM) and `data_path_takes_device_memory`.
DeviceProperties DescribeDevice(const NetInterface& itf, const std::optional<transport::FabricDeviceInfo>& fabric,
                                bool data_path_takes_device_memory);

// Whether the plugin's data path can send from and receive into GPU memory. Not yet: the client
// library touches payloads on the CPU and regMr takes host memory only. Until it can, the plugin
// never reports NCCL_PTR_CUDA, even where the provider has FI_HMEM, and NCCL stages GPU buffers
// through host memory by itself.
inline constexpr bool kDataPathTakesDeviceMemory = false;

// Device `dev` of Devices(), computed once; with OPTCAST_TRANSPORT=ofi the fabric is opened on
// the interface's address to ask libfabric (a provider that fails to open leaves the interface's
// values, with a WARN naming why).
const DeviceProperties& PropertiesOf(size_t dev);

}  // namespace optcast::nccl
