// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The point-to-point network NCCL uses between ranks (its ncclNet), over our TCP transport.
//
// Semantics follow NCCL's contract: listen/connect/accept never block (they return a null comm
// until the connection is ready), isend/irecv return a null request when they cannot proceed
// yet, and a request is finished when test() says so.
//
// The receiver drives the exchange, like NCCL's InfiniBand transport: every irecv sends a
// "clear to send" (sequence number, tags, buffer sizes) to the sender, and an isend is matched,
// by tag, against the oldest clear-to-send that still has an unmatched buffer. Data therefore
// only flows into buffers that are posted, and the sender knows where each byte lands.

#include <cstddef>

#include "nccl/nccl_abi.h"

namespace optcast::nccl::net {

inline constexpr int kMaxRecvs = 8;  // grouped receives per irecv (NCCL's maxRecvs)

ncclResult_t Init();
ncclResult_t Devices(int* ndev);
ncclResult_t Listen(int dev, void* handle, void** listen_comm);
ncclResult_t Connect(int dev, void* handle, void** send_comm);
ncclResult_t Accept(void* listen_comm, void** recv_comm);
ncclResult_t Isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t Irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                   void** request);
// Host memory needs no flush: completes at once (a null request means "done" to NCCL).
ncclResult_t Iflush(void* recv_comm, void** request);
// `sizes` (may be null) receives one entry per buffer of the request: bytes sent or received.
ncclResult_t Test(void* request, int* done, int* sizes);
ncclResult_t CloseSend(void* send_comm);
ncclResult_t CloseRecv(void* recv_comm);
ncclResult_t CloseListen(void* listen_comm);

}  // namespace optcast::nccl::net
