// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "nccl/plugin_entry.h"

#include "nccl/memory.h"

namespace optcast::nccl::plugin {

void WarnNoThrow(const char* what, const char* why) noexcept {
  try {
    OPTCAST_NCCL_WARN("{} failed with an internal error: {}", what, why);
  } catch (...) {
  }
}

ncclResult_t BadArgument(const char* what, long long value) noexcept {
  try {
    OPTCAST_NCCL_WARN("{} called with {}; refused (an NCCL/plugin ABI mismatch?)", what, value);
  } catch (...) {
  }
  return ncclInvalidArgument;
}

uint64_t Guid(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

ncclResult_t RegMrDmaBuf(void* /*comm*/, void* /*data*/, size_t size, int type, uint64_t /*offset*/, int fd,
                         void** mhandle) {
  return Guard("regMrDmaBuf", [&] { return RegisterDmaBuf(size, type, fd, mhandle); });
}

}  // namespace optcast::nccl::plugin
