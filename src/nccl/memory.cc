// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "nccl/memory.h"

#include "nccl/logging.h"

namespace optcast::nccl {

namespace {
constexpr uint64_t kRegionMagic = 0x4f50434d454d5247;  // "OPCMEMRG"
}  // namespace

ncclResult_t RegisterMemory(void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return ncclInvalidArgument;
  *mhandle = nullptr;
  if (type != kPtrHost) {
    OPTCAST_NCCL_WARN(
        "regMr of {} bytes with pointer type {} refused: the Optcast plugin takes host memory only "
        "(ptrSupport = NCCL_PTR_HOST), and NCCL stages GPU buffers through host memory by itself when told to: "
        "set NCCL_NET_GDR_LEVEL=LOC",
        size, type);
    return ncclInternalError;
  }
  *mhandle = new MemRegion{kRegionMagic, data, size, type};
  return ncclSuccess;
}

ncclResult_t RegisterDmaBuf(size_t size, int type, int fd, void** mhandle) {
  if (mhandle != nullptr) *mhandle = nullptr;
  OPTCAST_NCCL_WARN(
      "regMrDmaBuf of {} bytes (pointer type {}, fd {}) refused: the Optcast plugin does not support DMA-BUF "
      "(ptrSupport = NCCL_PTR_HOST, without NCCL_PTR_DMABUF), so NCCL stages GPU buffers through host memory. If "
      "NCCL keeps asking, it ignored ptrSupport: set NCCL_DMABUF_ENABLE=0",
      size, type, fd);
  return ncclInternalError;
}

MemRegion* RegionOf(void* mhandle) {
  auto* region = static_cast<MemRegion*>(mhandle);
  if (region == nullptr || region->magic != kRegionMagic) {
    OPTCAST_NCCL_WARN("deregMr with a handle that this plugin did not create");
    return nullptr;
  }
  return region;
}

ncclResult_t DeregisterMemory(void* mhandle) {
  if (mhandle == nullptr) return ncclSuccess;
  MemRegion* region = RegionOf(mhandle);
  if (region == nullptr) return ncclInvalidArgument;
  region->magic = 0;
  delete region;
  return ncclSuccess;
}

}  // namespace optcast::nccl
