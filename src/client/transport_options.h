// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The public API keeps a communicator's transport settings as plain fields of
// CommunicatorOptions; the transport takes them as one typed value (transport/options.h).

#include "optcast/communicator.h"
#include "transport/kind.h"
#include "transport/options.h"

namespace optcast::client {

// The settings of `o` for the transport `kind` (CommunicatorOptions::transport, already parsed),
// as checked by Communicator::Create. The libfabric provider is left to OPTCAST_OFI_PROVIDER.
transport::TransportOptions TransportOptionsFor(const CommunicatorOptions& o, transport::Kind kind);

}  // namespace optcast::client
