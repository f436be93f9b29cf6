// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/ofi/mr_cache.h"

#include <rdma/fi_errno.h>
#include <unistd.h>

#include <iterator>
#include <string>

namespace optcast::transport::ofi {

MrCache::~MrCache() {
  for (auto& [base, r] : regions_) fi_close(&r.mr->fid);
  for (fid_mr* m : retired_) fi_close(&m->fid);
}

Status MrCache::Lookup(const void* p, size_t n, fid_mr** mr) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = regions_.upper_bound(a);
  if (it != regions_.begin()) {
    --it;
    if (a + n <= it->first + it->second.len) {
      *mr = it->second.mr;
      return Status::Ok();
    }
  }
  // Whole pages: neighbouring buffers of one allocation then share the registration.
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = a & ~(page - 1);
  const uintptr_t end = (a + (n == 0 ? 1 : n) + page - 1) & ~(page - 1);
  fid_mr* m = nullptr;
  const int rc = fi_mr_reg(domain_, reinterpret_cast<const void*>(begin), end - begin, FI_SEND | FI_RECV, 0,
                           /*requested_key=*/next_key_++, 0, &m, nullptr);
  if (rc != 0) {
    return InternalError("fi_mr_reg of " + std::to_string(end - begin) + " bytes failed: " + fi_strerror(-rc) +
                         "; the locked-memory limit (ulimit -l) may be too low");
  }
  ++registrations_;
  auto [slot, fresh] = regions_.try_emplace(begin, Region{end - begin, m});
  if (!fresh) {
    // A longer region from the same page: the shorter one may still be in use by an operation
    // in flight, so it is closed only with the cache.
    retired_.push_back(slot->second.mr);
    slot->second = Region{end - begin, m};
  }
  *mr = m;
  return Status::Ok();
}

void MrCache::Deregister(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = regions_.upper_bound(a);
  if (it != regions_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.len > a) it = prev;
  }
  while (it != regions_.end() && it->first < a + n) {
    fi_close(&it->second.mr->fid);
    it = regions_.erase(it);
  }
}

}  // namespace optcast::transport::ofi
