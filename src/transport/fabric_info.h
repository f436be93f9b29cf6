// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What programs ask about libfabric without holding a fabric or a connection: which provider is
// asked for, which ones this machine offers, and what a provider's device is. The ofi backend
// answers (ofi/provider.h); these are its answers for code outside the transport. Free of
// libfabric's headers, and answered in every build: without libfabric (OPTCAST_WITH_OFI=OFF) no
// provider is available and ProbeFabricDevice says that the build has no libfabric support.

#include <string>
#include <vector>

#include "optcast/status.h"

namespace optcast::transport {

// What the NCCL plugin reports about the fabric device in use.
struct FabricDeviceInfo {
  std::string provider;  // "tcp;ofi_rxm", "efa", ...
  std::string name;      // the domain (interface or device) name
  std::string pci_path;  // "/sys/devices/..." when the provider names a PCI device, else ""
  int speed_mbps = 0;    // link speed when known, else 0
  bool hmem = false;     // the provider moves device (GPU) memory (FI_HMEM)
};

// The libfabric provider to use: OPTCAST_OFI_PROVIDER, else libfabric's own FI_PROVIDER, else ""
// (automatic: efa, then verbs;ofi_rxm, then tcp;ofi_rxm).
std::string RequestedFabricProvider();

// Every provider libfabric offers on this machine ("tcp;ofi_rxm", "shm", ...), without repeats.
std::vector<std::string> AvailableFabricProviders();

// Opens `provider` ("" = automatic) on the local address `source_host` and describes its device.
Status ProbeFabricDevice(const std::string& provider, const std::string& source_host, FabricDeviceInfo* out);

}  // namespace optcast::transport
