// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// OPTCAST_NET_PLUGIN: hand NCCL's point-to-point traffic to another net plugin (for example
// libnccl-net-ofi.so for EFA) while this library keeps serving CollNet. NCCL loads one library
// for both, so we load the other one ourselves and expose its ncclNet table as ours.

#include <string>

namespace optcast::nccl {

// "ofi" -> "libnccl-net-ofi.so"; a path or a "lib*.so" name is used as is (NCCL's rule).
std::string NetPluginLibraryName(const std::string& spec);

// The other plugin's "ncclNetPlugin_v<version>" table, or null when OPTCAST_NET_PLUGIN is unset
// or that library cannot serve `version` (a warning then says so). `self` is this library's
// own table, so that a variable naming this very plugin is caught.
const void* ForwardNetTable(int version, const void* self);

}  // namespace optcast::nccl
