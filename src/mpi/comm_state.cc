// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "mpi/comm_state.h"

#include <cstdio>
#include <mutex>
#include <set>

#include "common/env.h"

namespace optcast::mpi {
namespace {

std::mutex g_mu;
int g_keyval = MPI_KEYVAL_INVALID;
std::set<CommState*> g_states;  // every state attached to a live communicator

Config LoadConfig() {
  Config c;
  Status st = ApplyEnvironment(&c.client);
  if (!st.ok()) {
    std::fprintf(stderr, "optcast-mpi: %s; every collective stays with MPI\n", st.message().c_str());
    return c;
  }
  int64_t v = 0;
  if (!GetEnvInt("OPTCAST_MPI_DISABLE", 0, &v).ok() || v != 0) return c;
  if (auto stats = GetEnv("OPTCAST_MPI_STATS")) c.print_stats = *stats != "" && *stats != "0";
  c.min_bytes = 256 * 1024;
  if (auto min = GetEnv("OPTCAST_MPI_MIN_BYTES")) {
    auto bytes = ParseByteSize(*min);
    if (!bytes) {
      std::fprintf(stderr,
                   "optcast-mpi: OPTCAST_MPI_MIN_BYTES='%s' is not a size (write e.g. 0, 64K or 1M); "
                   "every collective stays with MPI\n",
                   min->c_str());
      return c;
    }
    c.min_bytes = *bytes;
  }
  c.enabled = !c.client.servers.empty();
  return c;
}

// Called by MPI when a communicator with our attribute is freed (and for every state at
// MPI_Finalize, where we delete the attributes ourselves).
int DeleteState(MPI_Comm, int, void* value, void*) {
  auto* state = static_cast<CommState*>(value);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_states.erase(state);
  }
  delete state;
  return MPI_SUCCESS;
}

CommState* CreateState(MPI_Comm comm) {
  auto state = std::make_unique<CommState>();
  state->comm = comm;
  PMPI_Comm_rank(comm, &state->rank);
  PMPI_Comm_size(comm, &state->size);
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (state->size > 1 && !inter) {
    // Rank 0 picks the job id; the broadcast is the agreement.
    JobId id;
    if (state->rank == 0) id = JobId::Random();
    PMPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_BYTE, 0, comm);
    CommunicatorOptions opts = GetConfig().client;
    opts.job_id = id;
    opts.rank = state->rank;
    opts.nranks = state->size;
    std::unique_ptr<Communicator> client;
    Status st = Communicator::Create(opts, &client);
    if (!st.ok()) {
      std::fprintf(stderr, "optcast-mpi: rank %d of a communicator of %d could not join the reduction servers: %s\n",
                   state->rank, state->size, st.ToString().c_str());
    }
    // All ranks route or none does.
    int all_ok = st.ok() ? 1 : 0;
    PMPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (all_ok) {
      state->client = std::move(client);
    } else if (state->rank == 0) {
      std::fprintf(stderr,
                   "optcast-mpi: a communicator of %d ranks keeps its collectives in MPI because not every "
                   "rank reached OPTCAST_SERVERS (see the errors above)\n",
                   state->size);
    }
  }
  CommState* raw = state.release();
  PMPI_Comm_set_attr(comm, g_keyval, raw);
  std::lock_guard<std::mutex> lock(g_mu);
  g_states.insert(raw);
  return raw;
}

}  // namespace

const Config& GetConfig() {
  static const Config config = LoadConfig();
  return config;
}

CommState* GetCommState(MPI_Comm comm) {
  if (!GetConfig().enabled || comm == MPI_COMM_NULL) return nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_keyval == MPI_KEYVAL_INVALID) PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, DeleteState, &g_keyval, nullptr);
  }
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, g_keyval, &value, &found);
  CommState* state = found ? static_cast<CommState*>(value) : CreateState(comm);
  return state->client ? state : nullptr;
}

void ReleaseAllCommStates() {
  if (g_keyval == MPI_KEYVAL_INVALID) return;
  std::set<CommState*> states;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    states = g_states;
  }
  for (CommState* s : states) PMPI_Comm_delete_attr(s->comm, g_keyval);  // runs DeleteState
  PMPI_Comm_free_keyval(&g_keyval);
}

}  // namespace optcast::mpi
