// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A stand-in for another NCCL net plugin (say libnccl-net-ofi.so) that only speaks v11, so the
// forwarding test can tell whose functions NCCL ends up calling.

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "nccl/nccl_abi.h"

using namespace optcast::nccl;  // NOLINT

namespace {

int g_marker = 0;  // the context the fake hands out
char g_name[] = "fake0";

ncclResult_t FakeInit(void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t, ncclProfilerCallback_t) {
  if (std::getenv("FAKE_NET_INIT_FAIL") != nullptr) return ncclSystemError;
  *ctx = &g_marker;
  return ncclSuccess;
}
ncclResult_t FakeDevices(int* n) {
  *n = 3;
  return ncclSuccess;
}
ncclResult_t FakeGetProperties(int dev, ncclNetProperties_v11_t* p) {
  std::memset(p, 0, sizeof(*p));
  p->name = g_name;
  p->ptrSupport = kPtrHost | kPtrCuda;
  p->speed = 400000;
  p->maxRecvs = 1;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  return ncclSuccess;
}
ncclResult_t FakeListen(void*, int, void*, void**) { return ncclInternalError; }
ncclResult_t FakeConnect(void*, int, void*, void**, ncclNetDeviceHandle_v11_t**) { return ncclInternalError; }
ncclResult_t FakeAccept(void*, void**, ncclNetDeviceHandle_v11_t**) { return ncclInternalError; }
ncclResult_t FakeRegMr(void*, void*, size_t, int, void**) { return ncclInternalError; }
ncclResult_t FakeRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclInternalError; }
ncclResult_t FakeDeregMr(void*, void*) { return ncclInternalError; }
ncclResult_t FakeIsend(void*, void*, size_t, int, void*, void*, void**) { return ncclInternalError; }
ncclResult_t FakeIrecv(void*, int, void**, size_t*, int*, void**, void**, void**) { return ncclInternalError; }
ncclResult_t FakeIflush(void*, int, void**, int*, void**, void**) { return ncclInternalError; }
ncclResult_t FakeTest(void*, int*, int*) { return ncclInternalError; }
ncclResult_t FakeClose(void*) { return ncclSuccess; }
ncclResult_t FakeFinalize(void* ctx) { return ctx == &g_marker ? ncclSuccess : ncclInvalidArgument; }
ncclResult_t FakeSetNetAttr(void*, ncclNetAttr_v11_t*) { return ncclSuccess; }

// As libinfinipath does when aws-ofi-nccl's libfabric loads it: the library's constructor takes
// SIGTERM for itself. The forwarding plugin must leave the program's handler in place.
void ExitOnSigterm(int) { _exit(99); }
__attribute__((constructor)) void TakeSigterm() {
  struct sigaction sa {};
  sa.sa_handler = ExitOnSigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    "Fake",          FakeInit,    FakeDevices, FakeGetProperties, FakeListen,   FakeConnect,    FakeAccept, FakeRegMr,
    FakeRegMrDmaBuf, FakeDeregMr, FakeIsend,   FakeIrecv,         FakeIflush,   FakeTest,       FakeClose,  FakeClose,
    FakeClose,       nullptr,     nullptr,     nullptr,           FakeFinalize, FakeSetNetAttr,
};
}  // extern "C"
