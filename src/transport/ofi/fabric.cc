// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/ofi/fabric.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "common/env.h"
#include "common/signal_dispositions.h"
#include "transport/ofi/libfabric.h"
#include "transport/ofi/provider.h"

namespace optcast::transport::ofi {

namespace {

constexpr uint32_t kApiVersion = FI_VERSION(1, 17);

// What Optcast needs of a provider: reliable datagrams, tagged messages delivered in the order
// they were sent, and whatever memory-registration duties the provider asks for.
fi_info* MakeHints(const std::string& provider, bool hmem) {
  fi_info* h = Libfabric().dupinfo(nullptr);  // fi_allocinfo()
  h->ep_attr->type = FI_EP_RDM;
  h->caps = FI_TAGGED | (hmem ? FI_HMEM : 0);
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | (hmem ? FI_MR_HMEM : 0);
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  if (!provider.empty()) h->fabric_attr->prov_name = strdup(provider.c_str());
  return h;
}

bool SocketBased(const std::string& provider) {
  return provider.rfind("tcp", 0) == 0 || provider.rfind("sockets", 0) == 0 || provider.rfind("udp", 0) == 0;
}

// fi_getinfo for one provider name; node + FI_SOURCE pins the local address when given.
int GetInfo(const std::string& provider, const std::string& source_host, bool hmem, fi_info** out) {
  fi_info* hints = MakeHints(provider, hmem);
  const bool pin = !source_host.empty() && SocketBased(provider);
  const int rc = FiGetInfo(kApiVersion, pin ? source_host.c_str() : nullptr, nullptr, pin ? FI_SOURCE : 0, hints, out);
  Libfabric().freeinfo(hints);
  return rc;
}

// Whether ofi_rxm will run over the tcp provider: asked for by name, or the default choice where
// the host has no RDMA device (efa and verbs come first but need one).
bool RxmOverTcp(const std::string& requested) {
  if (!requested.empty()) return requested.rfind("tcp", 0) == 0;
  std::error_code ec;
  const std::filesystem::directory_iterator devices("/sys/class/infiniband", ec);
  return ec || devices == std::filesystem::directory_iterator();
}

// Every connection has an endpoint of its own with a single peer, so ofi_rxm's defaults (queues
// and eager buffers sized for thousands of peers per endpoint) would cost ~100 ms of buffer setup
// per connection. Smaller defaults, each overridable in the environment; libfabric reads them
// when it first loads its providers, so `requested` (the provider asked for, "" for the default
// order) decides them once per process.
//
// Buffers. ofi_rxm grows each endpoint's send and receive bounce-buffer pools 1024 buffers at a
// time, and fills them with zeros. Over tcp, where dynamic receive buffers and direct sends carry
// eager payloads straight between the caller's memory and the socket, the bounce buffers carry
// only ofi_rxm's own control messages, and FI_OFI_RXM_EAGER_LIMIT sets the eager limit on its
// own: 1 KiB buffers and a 128 KiB eager limit take a connection from ~9 MiB of pools to ~2.7
// and skip the rendezvous round trip for payloads of 4 to 128 KiB (docs/benchmarks.md, "ofi_rxm's
// buffers and eager limit"). A larger limit loses: a payload that arrives before its receive is
// posted is copied through a buffer allocated for it. Over verbs the eager limit is
// the buffer size, which stays at 4 KiB there. Both sides of a connection must have the same
// eager limit (ofi_rxm refuses the connection otherwise): 128 KiB over tcp with buffers of up to
// 128 KiB (the limit is the larger of the two). Payloads above the buffer size may go eager only
// because each of our sends is one buffer, which ofi_rxm hands to tcp as it is: a send of more
// parts than tcp's iov limit would be copied into a bounce buffer too small for it.
//
// A SAR_LIMIT at or below the eager limit turns ofi_rxm's segmented protocol off, so what is not
// eager goes by rendezvous. Over tcp that is already so (dynamic receive buffers leave no SAR
// range); with FI_OFI_RXM_ENABLE_DYN_RBUF=0, or over verbs, ofi_rxm 1.17 would segment payloads
// between the eager limit and 8 times it, and a segmented payload cut short by its sender's death
// can leave fi_cq_read spinning for good on the dead connection's segments (a rank stuck in a failover test: 7 runs
// in 135 with dynamic buffers off; none in 160 with this).
void SetProviderDefaults(const std::string& requested) {
  static std::once_flag once;
  std::call_once(once, [&] {
    setenv("FI_OFI_RXM_RX_SIZE", "128", 0);
    setenv("FI_OFI_RXM_TX_SIZE", "128", 0);
    setenv("FI_OFI_RXM_MSG_RX_SIZE", "32", 0);
    setenv("FI_OFI_RXM_MSG_TX_SIZE", "32", 0);
    setenv("FI_OFI_RXM_BUFFER_SIZE", RxmOverTcp(requested) ? "1024" : "4096", 0);
    setenv("FI_OFI_RXM_EAGER_LIMIT", "131072", 0);
    setenv("FI_OFI_RXM_SAR_LIMIT", "0", 0);
  });
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

}  // namespace

std::vector<std::string> AvailableProviders() {
  std::vector<std::string> names;
  if (!LoadLibfabric().ok()) return names;
  SetProviderDefaults(RequestedProvider());
  fi_info* all = nullptr;
  if (FiGetInfo(kApiVersion, nullptr, nullptr, 0, nullptr, &all) != 0) return names;
  for (fi_info* i = all; i != nullptr; i = i->next) {
    std::string n = i->fabric_attr->prov_name;
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  Libfabric().freeinfo(all);
  return names;
}

Status Fabric::Open(const std::string& provider, const std::string& source_host, std::shared_ptr<Fabric>* out) {
  // Before anything is allocated: a bad limit is refused without leaking the provider's info.
  MrCache::Limits limits;
  OPTCAST_RETURN_IF_ERROR(MrCache::LimitsFromEnvironment(&limits));
  OPTCAST_RETURN_IF_ERROR(LoadLibfabric());
  SetProviderDefaults(provider);
  // A core provider without reliable datagrams of its own (tcp, verbs) gets them from ofi_rxm.
  std::vector<std::string> candidates;
  if (provider.empty()) {
    candidates = {"efa", "verbs;ofi_rxm", "tcp;ofi_rxm"};
  } else {
    candidates = {provider};
    if (provider.find(';') == std::string::npos) candidates.push_back(provider + ";ofi_rxm");
  }
  fi_info* info = nullptr;
  int rc = -FI_ENODATA;
  std::string chosen;
  for (const auto& c : candidates) {
    rc = GetInfo(c, source_host, false, &info);
    if (rc == 0) {
      chosen = c;
      break;
    }
  }
  if (rc != 0) {
    const std::string what =
        provider.empty()
            ? "no libfabric provider among efa, verbs;ofi_rxm and tcp;ofi_rxm offers reliable-datagram endpoints "
              "with tagged messages here"
            : "libfabric provider '" + provider +
                  "' is missing here or offers no reliable-datagram endpoints with tagged messages";
    return UnavailableError(what + " (" + Libfabric().strerror(-rc) +
                            "); available providers: " + Join(AvailableProviders()) +
                            "; choose one with OPTCAST_OFI_PROVIDER (e.g. OPTCAST_OFI_PROVIDER='tcp;ofi_rxm')");
  }
  std::shared_ptr<Fabric> f(new Fabric());
  f->info_ = Libfabric().dupinfo(info);
  Libfabric().freeinfo(info);
  f->provider_ = f->info_->fabric_attr->prov_name ? f->info_->fabric_attr->prov_name : chosen;
  f->local_mr_ = (f->info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  fi_info* hmem_info = nullptr;
  if (GetInfo(chosen, source_host, true, &hmem_info) == 0) {
    f->hmem_ = true;
    Libfabric().freeinfo(hmem_info);
  }
  {
    // Opening the fabric may initialise a provider's library too (common/signal_dispositions.h).
    SignalDispositionGuard keep;
    rc = Libfabric().fabric(f->info_->fabric_attr, &f->fabric_, nullptr);
  }
  if (rc != 0) return UnavailableError("fi_fabric(" + f->provider_ + ") failed: " + Libfabric().strerror(-rc));
  rc = fi_domain(f->fabric_, f->info_, &f->domain_, nullptr);
  if (rc != 0) return UnavailableError("fi_domain(" + f->provider_ + ") failed: " + Libfabric().strerror(-rc));
  f->mr_cache_ = std::make_unique<MrCache>(f->domain_, limits);
  *out = std::move(f);
  return Status::Ok();
}

Fabric::~Fabric() {
  mr_cache_.reset();
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  if (info_ != nullptr) Libfabric().freeinfo(info_);
}

Status Fabric::Acquire(const void* p, size_t n, void** desc, fid_mr** held) {
  *desc = nullptr;
  *held = nullptr;
  if (local_mr_) {
    OPTCAST_RETURN_IF_ERROR(mr_cache_->Acquire(p, n, held));
  } else if (!mr_cache_->AcquireCached(p, n, held)) {
    return Status::Ok();
  }
  *desc = fi_mr_desc(*held);
  return Status::Ok();
}

DeviceInfo Fabric::device() const {
  DeviceInfo d;
  d.provider = provider_;
  d.hmem = hmem_;
  d.name = info_->domain_attr->name ? info_->domain_attr->name : provider_;
  if (info_->nic != nullptr) {
    const fid_nic* nic = info_->nic;
    if (nic->device_attr != nullptr && nic->device_attr->name != nullptr) d.name = nic->device_attr->name;
    if (nic->bus_attr != nullptr && nic->bus_attr->bus_type == FI_BUS_PCI) {
      const fi_pci_attr& p = nic->bus_attr->attr.pci;
      char buf[64];
      snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", p.domain_id, p.bus_id, p.device_id, p.function_id);
      d.pci_path = std::string("/sys/bus/pci/devices/") + buf;
    }
    if (nic->link_attr != nullptr && nic->link_attr->speed > 0) {
      d.speed_mbps = static_cast<int>(nic->link_attr->speed / 1000000);
    }
  }
  return d;
}

Status ProbeDevice(const std::string& provider, const std::string& source_host, DeviceInfo* out) {
  std::shared_ptr<Fabric> fabric;
  OPTCAST_RETURN_IF_ERROR(Fabric::Open(provider, source_host, &fabric));
  *out = fabric->device();
  return Status::Ok();
}

}  // namespace optcast::transport::ofi
