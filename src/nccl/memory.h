// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Memory registration bookkeeping. TCP and the reduction servers need no pinned or registered
// memory, so a registration only records the range; it is not tied to a communicator, which is
// why the plugin reports regIsGlobal = 1.

#include <cstddef>
#include <cstdint>

#include "nccl/nccl_abi.h"

namespace optcast::nccl {

struct MemRegion {
  uint64_t magic;
  const void* data;
  size_t size;
  int type;
};

// Only host memory (NCCL_PTR_HOST) is accepted: the plugin advertises no GPU-direct support.
// Anything else is refused with ncclInternalError and a WARN saying why (NCCL never asks when
// it honours ptrSupport).
ncclResult_t RegisterMemory(void* data, size_t size, int type, void** mhandle);
ncclResult_t RegisterDmaBuf(size_t size, int type, int fd, void** mhandle);
ncclResult_t DeregisterMemory(void* mhandle);

}  // namespace optcast::nccl
