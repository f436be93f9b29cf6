// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <unordered_map>

#include "optcast/status.h"

namespace optcast::transport::ofi {

// Memory registrations of one domain, made once per region and reused: a buffer sent or received
// many times (a collective's send and receive buffers, the server's chunk buffers) is registered
// on first use only.
//
// A registration is held from Acquire to Release: by an operation in flight (a send or receive
// posted on it), by a connection's header slots, or by the NCCL plugin between regMr and deregMr.
// Held registrations are never closed. Registrations nobody holds stay cached for reuse, least
// recently used first out, while the cache is within its limits (bytes registered and number of
// registrations); past them, unheld ones are closed until it is within again or none is left.
class MrCache {
 public:
  struct Limits {
    uint64_t max_bytes = uint64_t{8} << 30;  // 0: no limit
    size_t max_entries = 1024;               // 0: no limit
  };
  // OPTCAST_OFI_MR_CACHE_BYTES (a size such as 8G) and OPTCAST_OFI_MR_CACHE_ENTRIES, each 0 for
  // no limit, else the defaults above; a bad value is an error naming the variable.
  static Status LimitsFromEnvironment(Limits* out);

  MrCache(fid_domain* domain, Limits limits) : domain_(domain), limits_(limits) {}
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // The registration covering [p, p+n), held until Release(*mr): a cached one when it covers the
  // range, else a new one for the pages holding [p, p+n).
  Status Acquire(const void* p, size_t n, fid_mr** mr);
  // Like Acquire, but only a cached registration: false (and nothing held) when none covers.
  bool AcquireCached(const void* p, size_t n, fid_mr** mr);
  // Ends one Acquire of `mr`.
  void Release(fid_mr* mr);
  // Forgets the cached registrations overlapping [p, p+n) (the memory is about to be freed):
  // unheld ones are closed now, held ones when their last holder releases them.
  void Deregister(const void* p, size_t n);

  // fi_mr_reg calls made so far; registrations open now (cached or held); bytes they cover;
  // registrations held now.
  uint64_t registrations() const { return registrations_; }
  size_t regions() const { return by_mr_.size(); }
  uint64_t bytes() const { return bytes_; }
  size_t held() const;
  const Limits& limits() const { return limits_; }

 private:
  struct Region {
    uintptr_t base = 0;
    size_t len = 0;
    fid_mr* mr = nullptr;
    uint32_t holders = 0;
    bool cached = true;                 // findable by address (false: replaced or deregistered, closes when free)
    std::list<Region*>::iterator idle;  // place in idle_ while holders == 0 and cached
  };
  void Close(Region* r);
  void MakeIdle(Region* r);
  void Evict();

  fid_domain* domain_;
  Limits limits_;
  std::map<uintptr_t, Region*> cached_;  // by first address
  std::unordered_map<fid_mr*, std::unique_ptr<Region>> by_mr_;
  std::list<Region*> idle_;  // unheld cached regions, least recently used first
  uint64_t bytes_ = 0;
  uint64_t registrations_ = 0;
  // Providers that let the application choose keys (no FI_MR_PROV_KEY) want them unique.
  uint64_t next_key_ = 1;
};

}  // namespace optcast::transport::ofi
