// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/ofi/mr_cache.h"

#include <rdma/fi_errno.h>
#include <unistd.h>

#include <iterator>
#include <string>

#include "common/env.h"
#include "transport/ofi/libfabric.h"

namespace optcast::transport::ofi {

Status MrCache::LimitsFromEnvironment(Limits* out) {
  *out = Limits{};
  if (auto v = GetEnv("OPTCAST_OFI_MR_CACHE_BYTES"); v && !v->empty()) {
    auto bytes = ParseByteSize(*v);
    if (!bytes) {
      return InvalidArgument("OPTCAST_OFI_MR_CACHE_BYTES='" + *v +
                             "' is not a size; write one such as 8G or 512M (0: no limit)");
    }
    out->max_bytes = *bytes;
  }
  int64_t entries = 0;
  OPTCAST_RETURN_IF_ERROR(GetEnvInt("OPTCAST_OFI_MR_CACHE_ENTRIES", static_cast<int64_t>(out->max_entries), &entries));
  if (entries < 0) {
    return InvalidArgument("OPTCAST_OFI_MR_CACHE_ENTRIES=" + std::to_string(entries) +
                           " is negative; give a number of registrations (0: no limit)");
  }
  out->max_entries = static_cast<size_t>(entries);
  return Status::Ok();
}

MrCache::~MrCache() {
  // Every connection of the domain is closed by now, so nothing is in flight on any of these.
  for (auto& [mr, r] : by_mr_) fi_close(&mr->fid);
}

size_t MrCache::held() const {
  size_t n = 0;
  for (const auto& [mr, r] : by_mr_) n += r->holders > 0 ? 1 : 0;
  return n;
}

bool MrCache::AcquireCached(const void* p, size_t n, fid_mr** mr) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = cached_.upper_bound(a);
  if (it == cached_.begin()) return false;
  Region* r = std::prev(it)->second;
  if (a + n > r->base + r->len) return false;
  if (r->holders++ == 0) idle_.erase(r->idle);
  *mr = r->mr;
  return true;
}

Status MrCache::Acquire(const void* p, size_t n, fid_mr** mr) {
  if (AcquireCached(p, n, mr)) return Status::Ok();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  // Whole pages: neighbouring buffers of one allocation then share the registration.
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = a & ~(page - 1);
  const uintptr_t end = (a + (n == 0 ? 1 : n) + page - 1) & ~(page - 1);
  fid_mr* m = nullptr;
  const int rc = fi_mr_reg(domain_, reinterpret_cast<const void*>(begin), end - begin, FI_SEND | FI_RECV, 0,
                           /*requested_key=*/next_key_++, 0, &m, nullptr);
  if (rc != 0) {
    return InternalError("fi_mr_reg of " + std::to_string(end - begin) + " bytes failed: " + Libfabric().strerror(-rc) +
                         "; the locked-memory limit (ulimit -l) may be too low, or lower "
                         "OPTCAST_OFI_MR_CACHE_BYTES");
  }
  ++registrations_;
  auto region = std::make_unique<Region>();
  Region* r = region.get();
  r->base = begin;
  r->len = end - begin;
  r->mr = m;
  r->holders = 1;
  by_mr_.emplace(m, std::move(region));
  bytes_ += r->len;
  auto [slot, fresh] = cached_.try_emplace(begin, r);
  if (!fresh) {
    // A longer region from the same page replaces the shorter one, which may still be held.
    Region* old = slot->second;
    slot->second = r;
    old->cached = false;
    if (old->holders == 0) {
      idle_.erase(old->idle);
      Close(old);
    }
  }
  Evict();
  *mr = m;
  return Status::Ok();
}

void MrCache::Release(fid_mr* mr) {
  auto it = by_mr_.find(mr);
  if (it == by_mr_.end() || it->second->holders == 0) return;
  Region* r = it->second.get();
  if (--r->holders > 0) return;
  if (!r->cached) {
    Close(r);
    return;
  }
  MakeIdle(r);
  Evict();
}

void MrCache::Deregister(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = cached_.upper_bound(a);
  if (it != cached_.begin()) {
    auto prev = std::prev(it);
    if (prev->second->base + prev->second->len > a) it = prev;
  }
  while (it != cached_.end() && it->first < a + n) {
    Region* r = it->second;
    it = cached_.erase(it);
    r->cached = false;
    if (r->holders == 0) {
      idle_.erase(r->idle);
      Close(r);
    }
  }
}

void MrCache::MakeIdle(Region* r) { r->idle = idle_.insert(idle_.end(), r); }

void MrCache::Close(Region* r) {
  if (r->cached) {
    auto c = cached_.find(r->base);
    if (c != cached_.end() && c->second == r) cached_.erase(c);
  }
  bytes_ -= r->len;
  fid_mr* mr = r->mr;
  fi_close(&mr->fid);
  by_mr_.erase(mr);  // frees r
}

void MrCache::Evict() {
  auto over = [&] {
    return (limits_.max_bytes > 0 && bytes_ > limits_.max_bytes) ||
           (limits_.max_entries > 0 && by_mr_.size() > limits_.max_entries);
  };
  while (over() && !idle_.empty()) {
    Region* r = idle_.front();
    idle_.pop_front();
    Close(r);
  }
}

}  // namespace optcast::transport::ofi
