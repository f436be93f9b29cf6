// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "optcast/status.h"

namespace optcast::transport::ofi {

// Memory registrations of one domain, made once per region and reused: a buffer sent or received
// many times (a collective's send and receive buffers, the server's chunk buffers) is registered
// on first use only. Regions stay registered until Deregister or the cache's end, so memory must
// not be freed while registered (see docs/transports.md).
class MrCache {
 public:
  explicit MrCache(fid_domain* domain) : domain_(domain) {}
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // The registration covering [p, p+n): an existing one when a cached region covers it, else a
  // new one for the pages holding [p, p+n).
  Status Lookup(const void* p, size_t n, fid_mr** mr);
  // Drops the registrations overlapping [p, p+n).
  void Deregister(const void* p, size_t n);

  // fi_mr_reg calls made so far, and regions held now.
  uint64_t registrations() const { return registrations_; }
  size_t regions() const { return regions_.size(); }

 private:
  struct Region {
    size_t len;
    fid_mr* mr;
  };
  fid_domain* domain_;
  std::map<uintptr_t, Region> regions_;  // by first address
  std::vector<fid_mr*> retired_;
  uint64_t registrations_ = 0;
  // Providers that let the application choose keys (no FI_MR_PROV_KEY) want them unique.
  uint64_t next_key_ = 1;
};

}  // namespace optcast::transport::ofi
