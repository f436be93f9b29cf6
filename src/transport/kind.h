// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <string>

#include "optcast/status.h"

namespace optcast::transport {

// Which transport carries the protocol: the built-in TCP streams (tcp/), or libfabric (ofi/).
enum class Kind { kTcp, kOfi };

const char* KindName(Kind k);
// Ok when this build carries `k`; else the error that says so and how to get it. ofi needs
// libfabric when Optcast is built (cmake -DOPTCAST_WITH_OFI=ON, the default).
Status CheckKindBuilt(Kind k);
// Parses "tcp" or "ofi"; the error names the accepted values and `what` (the flag or variable),
// or that this build has no libfabric support.
Status ParseKind(const std::string& text, const std::string& what, Kind* out);
// OPTCAST_TRANSPORT, or `fallback` when it is unset.
Status KindFromEnvironment(Kind fallback, Kind* out);

}  // namespace optcast::transport
