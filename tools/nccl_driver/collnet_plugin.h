// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A CollNet plugin library loaded the way NCCL loads it: dlopen, then the newest
// ncclCollNetPlugin_vN table it exports. The versions differ in small ways (init/listen with a
// context from v11, int sizes and counts before v8/v9, no finalize before v11); CollNetTable
// hides them behind one set of calls, so a driver is written once for every version.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "nccl/nccl_abi.h"
#include "optcast/status.h"
#include "tools/nccl_driver/plugin_log.h"

namespace optcast::tools::nccl_driver {

using nccl::ncclDataType_t;
using nccl::ncclRedOp_t;
using nccl::ncclResult_t;

// Where the plugin is: `hint` (--plugin) if given, else $OPTCAST_NCCL_PLUGIN, else the
// libnccl-net-optcast.so of the build tree or installation this executable belongs to. On
// failure the message lists every place looked at and how to point at the library.
Status FindPlugin(const std::string& hint, std::string* path);

// What getProperties reported, the fields a driver needs (any version).
struct CollNetProperties {
  std::string name;
  int ptr_support = 0;
  size_t max_coll_bytes = 0;  // 0: the version has no such field
};

// One plugin library, dlopen'ed, and its newest CollNet table. Calls go straight through to the
// plugin; results are NCCL's.
class CollNetTable {
 public:
  virtual ~CollNetTable() = default;
  // dlopens `path` and binds the newest ncclCollNetPlugin_vN (v12 down to v6) it exports.
  static Status Open(const std::string& path, std::unique_ptr<CollNetTable>* out);

  int version() const { return version_; }
  const std::string& path() const { return path_; }

  // init(logger); from v11 also a context, which finalize() ends.
  virtual ncclResult_t Init(nccl::ncclDebugLogger_t logger) = 0;
  virtual ncclResult_t Devices(int* ndev) = 0;
  virtual ncclResult_t GetProperties(int dev, CollNetProperties* props) = 0;
  virtual ncclResult_t Listen(int dev, void* handle, void** listen_comm) = 0;
  virtual ncclResult_t Connect(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm) = 0;
  virtual ncclResult_t CloseListen(void* listen_comm) = 0;
  virtual ncclResult_t RegMr(void* coll_comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t DeregMr(void* coll_comm, void* mhandle) = 0;
  virtual ncclResult_t IAllReduce(void* coll_comm, void* send, void* recv, size_t count, ncclDataType_t dt,
                                  ncclRedOp_t op, void* send_mhandle, void* recv_mhandle, void** request) = 0;
  virtual ncclResult_t Test(void* request, int* done, int* size) = 0;
  virtual ncclResult_t CloseColl(void* coll_comm) = 0;
  // No-op before v11.
  virtual ncclResult_t Finalize() = 0;

 protected:
  int version_ = 0;
  std::string path_;
};

// A logger with NCCL's signature for the plugin: WARN lines go to stderr, INFO lines too when
// NCCL_DEBUG is INFO or TRACE (as NCCL would show them). Lines are kept (plugin_log.h), so that
// an error can quote what the plugin said about it.
void PluginLogger(nccl::ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// "ncclSuccess", "ncclRemoteError", ...
const char* ResultName(ncclResult_t r);

}  // namespace optcast::tools::nccl_driver
