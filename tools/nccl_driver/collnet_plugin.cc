// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/nccl_driver/collnet_plugin.h"

#include <dlfcn.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <type_traits>

#include "common/env.h"

namespace optcast::tools::nccl_driver {

namespace {

constexpr char kLibraryName[] = "libnccl-net-optcast.so";

// Binds one version's table. The differences between versions are settled at compile time by
// asking whether the table has the field (finalize: v11+) or what a parameter's type is.
template <typename Table, typename Props>
class BoundTable final : public CollNetTable {
 public:
  BoundTable(void* lib, Table* t, int version, std::string path) : lib_(lib), t_(t) {
    version_ = version;
    path_ = std::move(path);
  }
  ~BoundTable() override { (void)lib_; }  // the library stays mapped: the plugin may keep threads

  static constexpr bool kHasContext = requires(Table * t) { t->finalize; };

  ncclResult_t Init(nccl::ncclDebugLogger_t logger) override {
    if constexpr (kHasContext) {
      return t_->init(&ctx_, 0, logger);
    } else {
      return t_->init(logger);
    }
  }
  ncclResult_t Devices(int* ndev) override { return t_->devices(ndev); }
  ncclResult_t GetProperties(int dev, CollNetProperties* out) override {
    Props p{};
    const ncclResult_t r = t_->getProperties(dev, &p);
    if (r != nccl::ncclSuccess) return r;
    out->name = p.name != nullptr ? p.name : "";
    out->ptr_support = p.ptrSupport;
    if constexpr (requires { p.maxCollBytes; }) out->max_coll_bytes = p.maxCollBytes;
    return r;
  }
  ncclResult_t Listen(int dev, void* handle, void** listen_comm) override {
    if constexpr (kHasContext) {
      return t_->listen(ctx_, dev, handle, listen_comm);
    } else {
      return t_->listen(dev, handle, listen_comm);
    }
  }
  ncclResult_t Connect(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm) override {
    return t_->connect(handles, nranks, rank, listen_comm, coll_comm);
  }
  ncclResult_t CloseListen(void* listen_comm) override { return t_->closeListen(listen_comm); }
  ncclResult_t RegMr(void* coll_comm, void* data, size_t size, int type, void** mhandle) override {
    if (!Fits<2>(size, t_->regMr)) return nccl::ncclInvalidArgument;
    return t_->regMr(coll_comm, data, size, type, mhandle);
  }
  ncclResult_t DeregMr(void* coll_comm, void* mhandle) override { return t_->deregMr(coll_comm, mhandle); }
  ncclResult_t IAllReduce(void* coll_comm, void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                          void* send_mhandle, void* recv_mhandle, void** request) override {
    if (!Fits<3>(count, t_->iallreduce)) return nccl::ncclInvalidArgument;
    return t_->iallreduce(coll_comm, send, recv, count, dt, op, send_mhandle, recv_mhandle, request);
  }
  ncclResult_t Test(void* request, int* done, int* size) override { return t_->test(request, done, size); }
  ncclResult_t CloseColl(void* coll_comm) override { return t_->closeColl(coll_comm); }
  ncclResult_t Finalize() override {
    if constexpr (kHasContext) {
      void* ctx = ctx_;
      ctx_ = nullptr;
      return ctx != nullptr ? t_->finalize(ctx) : nccl::ncclSuccess;
    } else {
      return nccl::ncclSuccess;
    }
  }

 private:
  // Whether `n` fits the size/count parameter (the third for regMr, the fourth for iallreduce),
  // which is int before v8 (regMr) or v9 (iallreduce).
  template <size_t I, typename R, typename... A>
  static bool Fits(size_t n, R (*)(A...)) {
    if constexpr (std::is_same_v<std::tuple_element_t<I, std::tuple<A...>>, int>) {
      return n <= static_cast<size_t>(INT_MAX);
    } else {
      return true;
    }
  }

  void* lib_;
  Table* t_;
  void* ctx_ = nullptr;
};

template <typename Table, typename Props>
bool TryBind(void* lib, const char* symbol, int version, const std::string& path, std::unique_ptr<CollNetTable>* out) {
  auto* t = static_cast<Table*>(dlsym(lib, symbol));
  if (t == nullptr) return false;
  *out = std::make_unique<BoundTable<Table, Props>>(lib, t, version, path);
  return true;
}

bool EchoInfo() {
  static const bool echo = [] {
    const std::string level = GetEnv("NCCL_DEBUG").value_or("");
    return strcasecmp(level.c_str(), "INFO") == 0 || strcasecmp(level.c_str(), "TRACE") == 0;
  }();
  return echo;
}

}  // namespace

Status FindPlugin(const std::string& hint, std::string* path) {
  namespace fs = std::filesystem;
  auto usable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
  };
  if (!hint.empty()) {
    if (!usable(hint)) {
      return InvalidArgument("--plugin " + hint + " is not a file; build it with `cmake --build build --target " +
                             "nccl-net-optcast` or name the libnccl-net-optcast.so to load");
    }
    *path = hint;
    return Status::Ok();
  }
  if (auto env = GetEnv("OPTCAST_NCCL_PLUGIN"); env && !env->empty()) {
    if (!usable(*env)) {
      return InvalidArgument("OPTCAST_NCCL_PLUGIN=" + *env +
                             " is not a file; point it (or --plugin) at a built libnccl-net-optcast.so");
    }
    *path = *env;
    return Status::Ok();
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    const fs::path dir = self.parent_path();
    candidates = {dir.parent_path() / "src" / "nccl" / kLibraryName,  // build tree: build/tools/optcast
                  dir.parent_path() / "lib" / kLibraryName,           // installed: PREFIX/bin/optcast
                  dir / kLibraryName};
  }
  std::string looked;
  for (const auto& c : candidates) {
    if (usable(c)) {
      *path = fs::weakly_canonical(c, ec).string();
      if (ec) *path = c.string();
      return Status::Ok();
    }
    looked += (looked.empty() ? "" : ", ") + c.string();
  }
  return UnavailableError(std::string(kLibraryName) + " not found (looked in " +
                          (looked.empty() ? std::string("no place: /proc/self/exe unreadable") : looked) +
                          "); build it with `cmake --build build --target nccl-net-optcast`, or name it with "
                          "--plugin PATH or OPTCAST_NCCL_PLUGIN=PATH");
}

Status CollNetTable::Open(const std::string& path, std::unique_ptr<CollNetTable>* out) {
  // RTLD_LOCAL, as NCCL does: the plugin keeps its own copies of our libraries.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    return UnavailableError("cannot load " + path + ": " + (err ? err : "dlopen failed"));
  }
  using namespace nccl;  // NOLINT: the table type names
  // Newest first, as NCCL probes them.
  if (TryBind<ncclCollNet_v12_t, ncclNetProperties_v12_t>(lib, "ncclCollNetPlugin_v12", 12, path, out) ||
      TryBind<ncclCollNet_v11_t, ncclNetProperties_v11_t>(lib, "ncclCollNetPlugin_v11", 11, path, out) ||
      TryBind<ncclCollNet_v10_t, ncclNetProperties_v10_t>(lib, "ncclCollNetPlugin_v10", 10, path, out) ||
      TryBind<ncclCollNet_v9_t, ncclNetProperties_v9_t>(lib, "ncclCollNetPlugin_v9", 9, path, out) ||
      TryBind<ncclCollNet_v8_t, ncclNetProperties_v8_t>(lib, "ncclCollNetPlugin_v8", 8, path, out) ||
      TryBind<ncclCollNet_v7_t, ncclNetProperties_v7_t>(lib, "ncclCollNetPlugin_v7", 7, path, out) ||
      TryBind<ncclCollNet_v6_t, ncclNetProperties_v6_t>(lib, "ncclCollNetPlugin_v6", 6, path, out)) {
    return Status::Ok();
  }
  dlclose(lib);
  return InvalidArgument(path + " exports no ncclCollNetPlugin_v6..v12 table; is it a CollNet plugin?");
}

void PluginLogger(nccl::ncclDebugLogLevel level, unsigned long /*flags*/, const char* /*file*/, int /*line*/,
                  const char* fmt, ...) {
  if (level != nccl::NCCL_LOG_WARN && !(level == nccl::NCCL_LOG_INFO && EchoInfo())) return;
  va_list ap;
  va_start(ap, fmt);
  const std::string text = FormatPluginLine(level, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[nccl-plugin] %s\n", text.c_str());
  KeepPluginLine(text);
}

const char* ResultName(ncclResult_t r) {
  switch (r) {
    case nccl::ncclSuccess: return "ncclSuccess";
    case nccl::ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case nccl::ncclSystemError: return "ncclSystemError";
    case nccl::ncclInternalError: return "ncclInternalError";
    case nccl::ncclInvalidArgument: return "ncclInvalidArgument";
    case nccl::ncclInvalidUsage: return "ncclInvalidUsage";
    case nccl::ncclRemoteError: return "ncclRemoteError";
    case nccl::ncclInProgress: return "ncclInProgress";
  }
  return "ncclResult?";
}

}  // namespace optcast::tools::nccl_driver
