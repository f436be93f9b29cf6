// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Built in every build. Where libfabric is built in, AvailableProviders and ProbeDevice are
// defined in fabric.cc beside the Fabric they use; here are their answers without it.
#include "transport/ofi/provider.h"

#include "common/env.h"
#include "transport/kind.h"

namespace optcast::transport::ofi {

std::string RequestedProvider() {
  if (auto p = GetEnv("OPTCAST_OFI_PROVIDER"); p && !p->empty()) return *p;
  if (auto p = GetEnv("FI_PROVIDER"); p && !p->empty()) return *p;
  return "";
}

#if !OPTCAST_WITH_OFI

std::vector<std::string> AvailableProviders() { return {}; }

Status ProbeDevice(const std::string& /*provider*/, const std::string& /*source_host*/, DeviceInfo* /*out*/) {
  return CheckKindBuilt(Kind::kOfi);
}

#endif

}  // namespace optcast::transport::ofi
