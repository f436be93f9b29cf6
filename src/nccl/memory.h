// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Memory registration bookkeeping. The point-to-point net plugin (TCP) needs no registered memory,
// so its registration only records the range. A CollNet registration also holds the
// communicator's transport registration (fi_mr_reg over libfabric, see collnet.h).

#include <cstddef>
#include <cstdint>

#include "nccl/nccl_abi.h"
#include "optcast/communicator.h"

namespace optcast::nccl {

struct MemRegion {
  uint64_t magic;
  const void* data;
  size_t size;
  int type;
  RegisteredMemory* registered = nullptr;  // CollNet: the communicator's registration
};

// Only host memory (NCCL_PTR_HOST) is accepted: the plugin advertises no GPU-direct support.
// Anything else is refused with ncclInternalError and a WARN saying why (NCCL never asks when
// it honours ptrSupport).
ncclResult_t RegisterMemory(void* data, size_t size, int type, void** mhandle);
ncclResult_t RegisterDmaBuf(size_t size, int type, int fd, void** mhandle);
ncclResult_t DeregisterMemory(void* mhandle);
// The region behind a handle from RegisterMemory, or null (with a WARN) when it is not one.
MemRegion* RegionOf(void* mhandle);

}  // namespace optcast::nccl
