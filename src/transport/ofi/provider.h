// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What programs ask about libfabric without holding a fabric: which provider is asked for, which
// ones this machine offers, and what a provider's device is. Free of libfabric's headers, and
// answered in every build: without libfabric (OPTCAST_WITH_OFI=OFF) no provider is available and
// ProbeDevice says that the build has no libfabric support. Code outside the transport asks
// through transport/fabric_info.h.

#include <string>
#include <vector>

#include "optcast/status.h"
#include "transport/fabric_info.h"

namespace optcast::transport::ofi {

// The libfabric provider to use: OPTCAST_OFI_PROVIDER, else libfabric's own FI_PROVIDER, else ""
// (automatic: efa, then verbs;ofi_rxm, then tcp;ofi_rxm).
std::string RequestedProvider();

// Every provider libfabric offers on this machine ("tcp;ofi_rxm", "shm", ...), without repeats.
std::vector<std::string> AvailableProviders();

// What the NCCL plugin reports about the device in use (defined with the contract).
using DeviceInfo = FabricDeviceInfo;

// Opens `provider` ("" = automatic) on the local address `source_host` (see Fabric::Open) and
// describes its device.
Status ProbeDevice(const std::string& provider, const std::string& source_host, DeviceInfo* out);

}  // namespace optcast::transport::ofi
