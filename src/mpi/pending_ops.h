// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Nonblocking collectives on the servers, seen by the program as MPI generalized requests.
// Optcast's client makes progress only when called, so the MPI_Wait/MPI_Test family drives
// these requests (and MPI's own) until they complete; a blocking collective on the servers
// drives MPI and the pending requests too, so a program whose ranks wait on different things
// cannot deadlock.

#include <mpi.h>

#include <chrono>
#include <functional>

#include "mpi/comm_state.h"

namespace optcast::mpi {

// Wraps an Optcast request in a generalized MPI request that completes with it. `after` runs
// once the data has landed (e.g. to move a result into place).
int StartPendingOp(CommState* state, Request* request, std::function<void()> after, MPI_Request* mpi_request);

bool AnyPendingOp();
bool IsPendingOp(MPI_Request request);

// Tests every pending request once, waiting up to `max_wait` on the oldest; completes the
// generalized requests of those that finished.
void ProgressPendingOps(std::chrono::milliseconds max_wait);

// Runs a collective issued on the servers to completion, driving MPI and the pending requests
// meanwhile. Returns MPI_SUCCESS or, after reporting the error, the communicator's error.
int WaitBlocking(CommState* state, Request* request, const char* what);

// Reports a failed collective on stderr and raises it on the communicator's error handler.
int RaiseError(MPI_Comm comm, const char* what, const Status& status);

}  // namespace optcast::mpi
