// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <memory>
#include <string>
#include <vector>

#include "optcast/status.h"
#include "transport/ofi/mr_cache.h"
#include "transport/ofi/provider.h"

namespace optcast::transport::ofi {

// One opened fabric and domain with reliable-datagram (FI_EP_RDM) tagged endpoints, ordered
// sends (FI_ORDER_SAS), completion queues with a waitable descriptor, and the cache of memory
// registrations made in this domain. Used by one thread at a time (FI_THREAD_DOMAIN).
class Fabric {
 public:
  // Opens `provider` ("" = automatic). `source_host`, when not empty, is the local address the
  // provider's sockets bind to (socket-based providers only), so that fabric traffic takes the
  // same interface as the control connection. The error lists the available providers.
  static Status Open(const std::string& provider, const std::string& source_host, std::shared_ptr<Fabric>* out);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  fi_info* info() const { return info_; }
  fid_fabric* fabric() const { return fabric_; }
  fid_domain* domain() const { return domain_; }
  const std::string& provider() const { return provider_; }
  // Sends and receives need registered memory and its descriptor (FI_MR_LOCAL).
  bool local_mr() const { return local_mr_; }
  // For a send or receive on [p, p+n): the descriptor and the registration behind it, held until
  // Release(*held). Where the provider needs registered memory, a region is registered on first
  // use and reused; where it does not, a registration made by Register is used when one covers
  // the range, else both are null.
  Status Acquire(const void* p, size_t n, void** desc, fid_mr** held);
  // Registers [p, p+n) whether or not the provider needs it (an explicit request, such as NCCL's
  // regMr), held until Release(*held); sends and receives in the range then use it.
  Status Register(const void* p, size_t n, fid_mr** held) { return mr_cache_->Acquire(p, n, held); }
  void Release(fid_mr* held) {
    if (held != nullptr) mr_cache_->Release(held);
  }
  MrCache& mr_cache() { return *mr_cache_; }
  DeviceInfo device() const;

 private:
  Fabric() = default;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  std::string provider_;
  bool local_mr_ = false;
  bool hmem_ = false;
  std::unique_ptr<MrCache> mr_cache_;
};

}  // namespace optcast::transport::ofi
