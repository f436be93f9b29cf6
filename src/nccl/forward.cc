// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "nccl/forward.h"

#include <dlfcn.h>

#include <mutex>

#include "common/env.h"
#include "common/signal_dispositions.h"
#include "nccl/logging.h"

namespace optcast::nccl {

namespace {

struct ForwardLibrary {
  std::string name;
  void* handle = nullptr;
};

// Opened once and never closed: NCCL may keep calling its functions until the process ends.
const ForwardLibrary& Library() {
  static const ForwardLibrary lib = [] {
    ForwardLibrary l;
    auto spec = GetEnv("OPTCAST_NET_PLUGIN");
    if (!spec) return l;
    l.name = NetPluginLibraryName(*spec);
    {
      // The plugin's libraries' constructors may take the program's signals (common/signal_dispositions.h).
      SignalDispositionGuard keep;
      l.handle = dlopen(l.name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (const std::string changed = keep.Restore(); !changed.empty()) {
        OPTCAST_NCCL_INFO(NCCL_INIT | NCCL_NET,
                          "OPTCAST_NET_PLUGIN: loading {} replaced the handlers of {}; the program's are back", l.name,
                          changed);
      }
    }
    if (l.handle == nullptr) {
      const char* err = dlerror();
      OPTCAST_NCCL_WARN("OPTCAST_NET_PLUGIN={}: cannot load {} ({}); using Optcast's TCP network for point-to-point",
                        *spec, l.name, err ? err : "unknown error");
    }
    return l;
  }();
  return lib;
}

}  // namespace

std::string NetPluginLibraryName(const std::string& spec) {
  const bool is_file = spec.find('/') != std::string::npos ||
                       (spec.rfind("lib", 0) == 0 && spec.size() > 3 && spec.compare(spec.size() - 3, 3, ".so") == 0);
  return is_file ? spec : "libnccl-net-" + spec + ".so";
}

const void* ForwardNetTable(int version, const void* self) {
  const ForwardLibrary& lib = Library();
  if (lib.handle == nullptr) return nullptr;
  const std::string symbol = "ncclNetPlugin_v" + std::to_string(version);
  const void* table = dlsym(lib.handle, symbol.c_str());
  if (table == nullptr) {
    OPTCAST_NCCL_WARN(
        "OPTCAST_NET_PLUGIN: {} has no {} (NCCL asked for v{}); using Optcast's TCP network for "
        "point-to-point",
        lib.name, symbol, version);
    return nullptr;
  }
  if (table == self) {
    OPTCAST_NCCL_WARN("OPTCAST_NET_PLUGIN names this plugin ({}); using Optcast's TCP network for point-to-point",
                      lib.name);
    return nullptr;
  }
  return table;
}

}  // namespace optcast::nccl
