// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Built in every build, as ofi/provider.cc is.
#include "transport/fabric_info.h"

#include "transport/ofi/provider.h"

namespace optcast::transport {

std::string RequestedFabricProvider() { return ofi::RequestedProvider(); }

std::vector<std::string> AvailableFabricProviders() { return ofi::AvailableProviders(); }

Status ProbeFabricDevice(const std::string& provider, const std::string& source_host, FabricDeviceInfo* out) {
  return ofi::ProbeDevice(provider, source_host, out);
}

}  // namespace optcast::transport
