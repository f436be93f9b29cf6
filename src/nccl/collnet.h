// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The CollNet side of the plugin: NCCL's collective network, implemented by an
// optcast::Communicator talking to the reduction servers named by OPTCAST_SERVERS.
//
// One collComm serves every channel of an NCCL communicator on one device. All ranks issue
// the same collnet calls in the same order (NCCL enforces that order across channels), so each
// call becomes one Optcast collective and the servers match them by sequence number.

#include <cstddef>

#include "nccl/nccl_abi.h"
#include "optcast/job_id.h"
#include "optcast/types.h"

namespace optcast::nccl::collnet {

// One element of a scatter-gather list (any ABI version, widened).
struct Sge {
  void* mhandle;
  void* address;
  size_t size;
};

// Logs (once per process) whether CollNet can be active and why not.
ncclResult_t Init();
// 1 when OPTCAST_SERVERS is set and parses, else 0 (NCCL then leaves CollNet off).
int DeviceCount();

ncclResult_t Listen(int dev, void* handle, void** listen_comm);
ncclResult_t Connect(void* const* handles, int nranks, int rank, void* listen_comm, void** coll_comm);
ncclResult_t ReduceSupport(int nccl_dtype, int nccl_op, int* supported);

ncclResult_t IAllReduce(void* coll_comm, const void* send, void* recv, size_t count, int nccl_dtype, int nccl_op,
                        void** request);
// NCCL's all-gather over a window of the gathered buffer: the full result is nranks parts of
// bytes_per_rank bytes; this call fills [window_offset, window_offset + window_bytes) into
// recv_parts. `send` holds this rank's bytes of that window (its part intersected with the
// window), starting at the first of them.
ncclResult_t IAllGather(void* coll_comm, const void* send, const Sge* recv_parts, int nparts, size_t bytes_per_rank,
                        size_t window_offset, size_t window_bytes, void** request);
// NCCL's reduce-scatter over a window of the reduced buffer: send_parts hold the window of the
// full input, `recv` receives this rank's part intersected with the window.
ncclResult_t IReduceScatter(void* coll_comm, const Sge* send_parts, int nparts, void* recv, size_t bytes_per_rank,
                            size_t window_offset, size_t window_bytes, int nccl_dtype, int nccl_op, void** request);
// regMr/deregMr on a collComm: the buffer is registered with the communicator's transport (over
// libfabric, fi_mr_reg in the domain of each server connection) and reused by every collective.
ncclResult_t RegMr(void* coll_comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t DeregMr(void* coll_comm, void* mhandle);
// Host memory needs no flush; completes at once.
ncclResult_t Iflush(void** request);
ncclResult_t Test(void* request, int* done, int* size);
ncclResult_t CloseColl(void* coll_comm);
ncclResult_t CloseListen(void* listen_comm);

// NCCL type and operator numbering to Optcast's. False for what the servers cannot reduce
// (fp8, avg, user-defined operators).
bool ToOptcastType(int nccl_dtype, DataType* out);
bool ToOptcastOp(int nccl_op, RedOp* out);

// The job id every rank derives from the same array of listen handles: a 128-bit hash of the
// handles (each carries a random nonce), so different communicators never share a job.
JobId JobIdFromHandles(const void* const* handles, int nranks);

}  // namespace optcast::nccl::collnet
