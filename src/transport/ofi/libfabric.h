// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// libfabric, loaded with dlopen when the ofi transport is first used rather than linked: every
// program and library built with the ofi transport (the NCCL plugin above all, which is copied
// into training images that may have no libfabric) then loads and runs the tcp transport without
// it, and only choosing ofi asks for libfabric.so.1.
//
// Only the five functions below are libfabric's exported symbols; everything else Optcast calls
// (fi_domain, fi_endpoint, fi_tsend, fi_close, ...) is an inline function of libfabric's headers
// that goes through the tables of the objects these return.

#include <rdma/fabric.h>

#include "optcast/status.h"

namespace optcast::transport::ofi {

struct LibfabricApi {
  int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
                 fi_info** info);
  void (*freeinfo)(fi_info* info);
  fi_info* (*dupinfo)(const fi_info* info);
  int (*fabric)(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
  const char* (*strerror)(int errnum);
};

// The symbol versions bound: those a program linked against the libfabric whose headers are
// compiled here (1.17) would bind. Later libfabric releases keep every older version, so a newer
// libfabric.so.1 gives the same functions with the same structure layouts.
struct LibfabricSymbol {
  const char* name;
  const char* version;
};
inline constexpr LibfabricSymbol kLibfabricSymbols[] = {
    {"fi_getinfo", "FABRIC_1.3"}, {"fi_freeinfo", "FABRIC_1.3"}, {"fi_dupinfo", "FABRIC_1.3"},
    {"fi_fabric", "FABRIC_1.1"},  {"fi_strerror", "FABRIC_1.0"},
};

// Loads libfabric.so.1 (the dynamic loader's search path: LD_LIBRARY_PATH, the cache, the system
// directories) on the first call and binds the functions; later calls return the first answer.
// Thread-safe. The error says that the ofi transport needs libfabric and how to get it.
Status LoadLibfabric();

// The bound functions. Only after LoadLibfabric() succeeded (every Fabric holds that).
const LibfabricApi& Libfabric();

// fi_getinfo, keeping the process's signal handlers: the first call loads and initialises the
// providers, whose libraries may install their own (signal_dispositions.h). Loading libfabric.so.1
// keeps them too.
int FiGetInfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
              fi_info** info);

}  // namespace optcast::transport::ofi
