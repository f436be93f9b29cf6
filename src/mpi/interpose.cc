// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// liboptcast-mpi.so: the MPI entry points it defines take precedence over the MPI library's
// (LD_PRELOAD or linking before -lmpi) and reach the library through the standard PMPI_ names.
// A collective goes to the reduction servers when it qualifies (predefined packed datatype,
// predefined arithmetic op, intracommunicator, at least OPTCAST_MPI_MIN_BYTES, servers set);
// everything else is handed to the MPI library unchanged.

#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mpi/comm_state.h"
#include "mpi/mpi_types.h"
#include "mpi/pending_ops.h"

#define OPTCAST_MPI_EXPORT extern "C" __attribute__((visibility("default")))

namespace optcast::mpi {
namespace {

enum Kind { kAllreduce, kIallreduce, kReduceScatterBlock, kAllgather, kNumKinds };
const char* const kKindNames[kNumKinds] = {"MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce_scatter_block",
                                           "MPI_Allgather"};
std::atomic<long> g_routed[kNumKinds];
std::atomic<long> g_passed[kNumKinds];

struct Reduction {
  DataType dtype;
  RedOp op;
  size_t esize;
};

// The Optcast form of (datatype, op) when both qualify.
std::optional<Reduction> AsReduction(MPI_Datatype datatype, MPI_Op op) {
  if (!GetConfig().enabled) return std::nullopt;
  auto dt = ReducibleType(datatype);
  auto rop = ReducibleOp(op);
  if (!dt || !rop) return std::nullopt;
  return Reduction{*dt, *rop, DataTypeSize(*dt)};
}

bool LargeEnough(size_t bytes) { return bytes > 0 && bytes >= GetConfig().min_bytes; }

// "256K", "1M", "1000 bytes": how OPTCAST_MPI_MIN_BYTES is written.
std::string SizeText(size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

// One line on rank 0 when MPI starts: what goes to the servers, or why nothing does.
void AnnounceAtInit() {
  const Config& c = GetConfig();
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  // Collective: every rank asks, rank 0 speaks.
  const bool one_host = c.enabled && size > 1 && OnOneHost(MPI_COMM_WORLD);
  if (rank != 0) return;
  if (!c.enabled) {
    std::fprintf(stderr, "optcast-mpi: %s: every collective stays with MPI\n", c.why_off.c_str());
    return;
  }
  std::string servers;
  for (const auto& s : c.client.servers) servers += (servers.empty() ? "" : ",") + s;
  if (one_host && !c.one_host_to_servers) {
    std::fprintf(stderr,
                 "optcast-mpi: all %d ranks run on one host, where MPI's shared memory beats the reduction servers: "
                 "collectives stay with MPI (OPTCAST_MPI_ONE_HOST=servers sends those of %s or more to %s)\n",
                 size, SizeText(c.min_bytes).c_str(), servers.c_str());
  } else {
    std::fprintf(stderr,
                 "optcast-mpi: collectives of %s or more (OPTCAST_MPI_MIN_BYTES) go to the reduction servers %s%s; "
                 "the rest stay with MPI\n",
                 SizeText(c.min_bytes).c_str(), servers.c_str(),
                 one_host ? " although every rank runs on one host (OPTCAST_MPI_ONE_HOST=servers)" : "");
  }
  std::fflush(stderr);
}

// At MPI_Finalize, rank 0 says how many of its collectives the servers did.
void AnnounceAtFinalize() {
  if (!GetConfig().enabled) return;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  long routed = 0, all = 0;
  for (int k = 0; k < kNumKinds; ++k) {
    routed += g_routed[k].load();
    all += g_routed[k].load() + g_passed[k].load();
  }
  std::fprintf(stderr,
               "optcast-mpi: %ld of rank 0's %ld collectives that Optcast can take went to the reduction servers "
               "(OPTCAST_MPI_STATS=1: every rank's counts by kind)\n",
               routed, all);
}

void PrintStats() {
  if (!GetConfig().print_stats) return;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string line;
  for (int k = 0; k < kNumKinds; ++k) {
    line += std::string(k ? "; " : "") + kKindNames[k] + " " + std::to_string(g_routed[k].load()) + " via servers " +
            std::to_string(g_passed[k].load()) + " via MPI";
  }
  std::fprintf(stderr, "optcast-mpi: rank %d: %s\n", rank, line.c_str());
}

// A wait on MPI requests that keeps the servers' requests moving while MPI's are not done.
// `test` must not block; `wait` is used once nothing of ours is pending.
template <typename Test, typename Wait>
int WaitDriving(bool waits_on_ours, Test test, Wait wait) {
  while (AnyPendingOp()) {
    ProgressPendingOps(std::chrono::milliseconds(waits_on_ours ? 1 : 0));
    int flag = 0;
    int rc = test(&flag);
    if (rc != MPI_SUCCESS || flag) return rc;
  }
  return wait();
}

bool AnyOurs(int count, const MPI_Request* requests) {
  if (!AnyPendingOp()) return false;
  for (int i = 0; i < count; ++i) {
    if (IsPendingOp(requests[i])) return true;
  }
  return false;
}

}  // namespace
}  // namespace optcast::mpi

using namespace optcast;
using namespace optcast::mpi;

OPTCAST_MPI_EXPORT int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) AnnounceAtInit();
  return rc;
}

OPTCAST_MPI_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) AnnounceAtInit();
  return rc;
}

OPTCAST_MPI_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                     MPI_Comm comm) {
  auto red = AsReduction(datatype, op);
  CommState* state = red && count > 0 && LargeEnough(size_t(count) * red->esize) ? GetCommState(comm) : nullptr;
  if (!state) {
    ++g_passed[kAllreduce];
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  ++g_routed[kAllreduce];
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  Request* req = nullptr;
  Status st = state->client->IAllReduce(src, recvbuf, size_t(count), red->dtype, red->op, &req);
  if (!st.ok()) return RaiseError(comm, "MPI_Allreduce", st);
  return WaitBlocking(state, req, "MPI_Allreduce");
}

OPTCAST_MPI_EXPORT int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                      MPI_Comm comm, MPI_Request* request) {
  auto red = AsReduction(datatype, op);
  CommState* state = red && count > 0 && LargeEnough(size_t(count) * red->esize) ? GetCommState(comm) : nullptr;
  if (!state) {
    ++g_passed[kIallreduce];
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  }
  ++g_routed[kIallreduce];
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  Request* req = nullptr;
  Status st = state->client->IAllReduce(src, recvbuf, size_t(count), red->dtype, red->op, &req);
  if (!st.ok()) return RaiseError(comm, "MPI_Iallreduce", st);
  int rc = StartPendingOp(state, req, nullptr, request);
  // Send the first chunks now, so the servers start while the program computes.
  if (rc == MPI_SUCCESS) ProgressPendingOps(std::chrono::milliseconds(0));
  return rc;
}

OPTCAST_MPI_EXPORT int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  auto red = AsReduction(datatype, op);
  int size = 1;
  PMPI_Comm_size(comm, &size);
  CommState* state =
      red && recvcount > 0 && LargeEnough(size_t(recvcount) * size * red->esize) ? GetCommState(comm) : nullptr;
  if (!state) {
    ++g_passed[kReduceScatterBlock];
    return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  }
  ++g_routed[kReduceScatterBlock];
  const size_t part = size_t(recvcount) * red->esize;
  auto* out = static_cast<uint8_t*>(recvbuf);
  // In place, MPI's input is the whole of recvbuf and the result goes to its start; Optcast's
  // in-place form leaves the result in this rank's part, so move it afterwards.
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const void* src = in_place ? recvbuf : sendbuf;
  uint8_t* dst = in_place ? out + part * state->rank : out;
  Request* req = nullptr;
  Status st = state->client->IReduceScatter(src, dst, size_t(recvcount), red->dtype, red->op, &req);
  if (!st.ok()) return RaiseError(comm, "MPI_Reduce_scatter_block", st);
  int rc = WaitBlocking(state, req, "MPI_Reduce_scatter_block");
  if (rc == MPI_SUCCESS && dst != out) std::memmove(out, dst, part);
  return rc;
}

OPTCAST_MPI_EXPORT int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                     int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  std::optional<size_t> rsize = GetConfig().enabled ? PackedNamedTypeSize(recvtype) : std::nullopt;
  // Out of place, the two sides must describe the same bytes (as the servers move bytes).
  bool same = in_place || (sendtype == recvtype && sendcount == recvcount);
  int size = 1;
  PMPI_Comm_size(comm, &size);
  const size_t part = rsize ? size_t(recvcount) * *rsize : 0;
  CommState* state = rsize && same && recvcount > 0 && LargeEnough(part * size) ? GetCommState(comm) : nullptr;
  if (!state) {
    ++g_passed[kAllgather];
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  ++g_routed[kAllgather];
  auto* out = static_cast<uint8_t*>(recvbuf);
  const void* src = in_place ? out + part * state->rank : sendbuf;
  Request* req = nullptr;
  Status st = state->client->IAllGather(src, out, part, DataType::kUInt8, &req);
  if (!st.ok()) return RaiseError(comm, "MPI_Allgather", st);
  return WaitBlocking(state, req, "MPI_Allgather");
}

// ---- Completion: MPI's wait/test calls also drive the servers' requests ----

OPTCAST_MPI_EXPORT int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  return WaitDriving(
      IsPendingOp(*request), [&](int* flag) { return PMPI_Test(request, flag, status); },
      [&] { return PMPI_Wait(request, status); });
}

OPTCAST_MPI_EXPORT int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (AnyPendingOp()) ProgressPendingOps(std::chrono::milliseconds(0));
  return PMPI_Test(request, flag, status);
}

OPTCAST_MPI_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  return WaitDriving(
      AnyOurs(count, requests), [&](int* flag) { return PMPI_Testall(count, requests, flag, statuses); },
      [&] { return PMPI_Waitall(count, requests, statuses); });
}

OPTCAST_MPI_EXPORT int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (AnyPendingOp()) ProgressPendingOps(std::chrono::milliseconds(0));
  return PMPI_Testall(count, requests, flag, statuses);
}

OPTCAST_MPI_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  return WaitDriving(
      AnyOurs(count, requests), [&](int* flag) { return PMPI_Testany(count, requests, index, flag, status); },
      [&] { return PMPI_Waitany(count, requests, index, status); });
}

OPTCAST_MPI_EXPORT int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  if (AnyPendingOp()) ProgressPendingOps(std::chrono::milliseconds(0));
  return PMPI_Testany(count, requests, index, flag, status);
}

OPTCAST_MPI_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                                    MPI_Status statuses[]) {
  return WaitDriving(
      AnyOurs(incount, requests),
      [&](int* flag) {
        int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
        *flag = *outcount != 0;  // MPI_UNDEFINED (all inactive) ends the wait too
        return rc;
      },
      [&] { return PMPI_Waitsome(incount, requests, outcount, indices, statuses); });
}

OPTCAST_MPI_EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                                    MPI_Status statuses[]) {
  if (AnyPendingOp()) ProgressPendingOps(std::chrono::milliseconds(0));
  return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

OPTCAST_MPI_EXPORT int MPI_Request_free(MPI_Request* request) {
  // A generalized request may only be freed once complete: finish ours first.
  while (IsPendingOp(*request)) ProgressPendingOps(std::chrono::milliseconds(1));
  return PMPI_Request_free(request);
}

OPTCAST_MPI_EXPORT int MPI_Finalize() {
  while (AnyPendingOp()) ProgressPendingOps(std::chrono::milliseconds(1));
  PrintStats();
  AnnounceAtFinalize();
  ReleaseAllCommStates();
  return PMPI_Finalize();
}
