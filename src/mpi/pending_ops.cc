// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "mpi/pending_ops.h"

#include <cstdio>
#include <deque>
#include <mutex>

namespace optcast::mpi {
namespace {

// What the generalized request reports when the program waits on it.
struct GreqResult {
  int error = MPI_SUCCESS;
};

struct PendingOp {
  CommState* state;
  Request* request;
  std::function<void()> after;
  MPI_Request mpi_request;
  GreqResult* result;
};

std::recursive_mutex g_mu;
std::deque<PendingOp> g_ops;

int QueryFn(void* extra, MPI_Status* status) {
  auto* result = static_cast<GreqResult*>(extra);
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  status->MPI_ERROR = result->error;
  return result->error;
}

int FreeFn(void* extra) {
  delete static_cast<GreqResult*>(extra);
  return MPI_SUCCESS;
}

// Once sent to the servers a collective cannot be taken back.
int CancelFn(void*, int) { return MPI_SUCCESS; }

void Finish(PendingOp& op, const Status& st) {
  if (st.ok()) {
    if (op.after) op.after();
  } else {
    std::fprintf(stderr, "optcast-mpi: rank %d: MPI_Iallreduce failed on the reduction servers: %s\n", op.state->rank,
                 st.ToString().c_str());
    op.result->error = MPI_ERR_OTHER;
  }
  PMPI_Grequest_complete(op.mpi_request);
}

}  // namespace

int StartPendingOp(CommState* state, Request* request, std::function<void()> after, MPI_Request* mpi_request) {
  auto* result = new GreqResult;
  int rc = PMPI_Grequest_start(QueryFn, FreeFn, CancelFn, result, mpi_request);
  if (rc != MPI_SUCCESS) {
    delete result;
    return rc;
  }
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_ops.push_back({state, request, std::move(after), *mpi_request, result});
  return MPI_SUCCESS;
}

bool AnyPendingOp() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return !g_ops.empty();
}

bool IsPendingOp(MPI_Request request) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  for (const PendingOp& op : g_ops) {
    if (op.mpi_request == request) return true;
  }
  return false;
}

void ProgressPendingOps(std::chrono::milliseconds max_wait) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  bool first = true;
  for (auto it = g_ops.begin(); it != g_ops.end();) {
    bool done = false;
    Status st =
        first ? it->state->client->TestFor(it->request, max_wait, &done) : it->state->client->Test(it->request, &done);
    first = false;
    if (!done && st.ok()) {
      ++it;
      continue;
    }
    PendingOp op = std::move(*it);
    it = g_ops.erase(it);
    Finish(op, st);
  }
}

int RaiseError(MPI_Comm comm, const char* what, const Status& status) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  std::fprintf(stderr, "optcast-mpi: rank %d: %s failed on the reduction servers: %s\n", rank, what,
               status.ToString().c_str());
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

int WaitBlocking(CommState* state, Request* request, const char* what) {
  while (true) {
    bool done = false;
    Status st = state->client->TestFor(request, std::chrono::milliseconds(1), &done);
    if (!st.ok()) return RaiseError(state->comm, what, st);
    if (done) return MPI_SUCCESS;
    // Keep MPI's own traffic moving: a peer may be blocked on a message from this rank before it
    // can join this collective.
    int flag = 0;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, state->comm, &flag, MPI_STATUS_IGNORE);
    if (AnyPendingOp()) ProgressPendingOps(std::chrono::milliseconds(0));
  }
}

}  // namespace optcast::mpi
