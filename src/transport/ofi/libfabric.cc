// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/ofi/libfabric.h"

#include <dlfcn.h>

#include <iterator>
#include <mutex>
#include <string>

#include "common/log.h"
#include "common/signal_dispositions.h"

namespace optcast::transport::ofi {

namespace {

constexpr char kSoname[] = "libfabric.so.1";

LibfabricApi api;

Status Load() {
  // Never closed: providers keep threads and registrations that live as long as the process.
  void* handle = nullptr;
  {
    SignalDispositionGuard keep;
    handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
    if (const std::string changed = keep.Restore(); !changed.empty()) {
      Log().info("loading {} replaced the handlers of {}; the program's are back", kSoname, changed);
    }
  }
  if (handle == nullptr) {
    const char* why = dlerror();
    return UnavailableError(std::string("the ofi transport needs libfabric, and ") + kSoname +
                            " could not be loaded (" + (why != nullptr ? why : "unknown reason") +
                            "); install it (Debian, Ubuntu: apt-get install libfabric1; AWS EFA: the EFA installer) "
                            "or put the directory that holds it on LD_LIBRARY_PATH, or use the tcp transport "
                            "(OPTCAST_TRANSPORT=tcp, the default)");
  }
  void** slots[] = {reinterpret_cast<void**>(&api.getinfo), reinterpret_cast<void**>(&api.freeinfo),
                    reinterpret_cast<void**>(&api.dupinfo), reinterpret_cast<void**>(&api.fabric),
                    reinterpret_cast<void**>(&api.strerror)};
  static_assert(std::size(kLibfabricSymbols) == std::size(slots));
  for (size_t i = 0; i < std::size(slots); ++i) {
    const LibfabricSymbol& s = kLibfabricSymbols[i];
    *slots[i] = dlvsym(handle, s.name, s.version);
    if (*slots[i] == nullptr) {
      return UnavailableError(std::string("the ofi transport needs libfabric ") + std::to_string(FI_MAJOR_VERSION) +
                              "." + std::to_string(FI_MINOR_VERSION) + " or a later release, and the " + kSoname +
                              " loaded here has no " + s.name + "@" + s.version + "; install a newer libfabric");
    }
  }
  return Status::Ok();
}

}  // namespace

Status LoadLibfabric() {
  static const Status loaded = Load();
  return loaded;
}

const LibfabricApi& Libfabric() { return api; }

int FiGetInfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
              fi_info** info) {
  // One at a time: a guard whose snapshot fell inside another call's span would put back the
  // handlers that call had just undone.
  static std::mutex serial;
  const std::lock_guard lock(serial);
  SignalDispositionGuard keep;
  const int rc = api.getinfo(version, node, service, flags, hints, info);
  if (const std::string changed = keep.Restore(); !changed.empty()) {
    Log().info("libfabric's providers replaced the handlers of {}; the program's are back", changed);
  }
  return rc;
}

}  // namespace optcast::transport::ofi
