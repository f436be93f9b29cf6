// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "mpi/comm_state.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>

#include "common/env.h"

namespace optcast::mpi {
namespace {

std::mutex g_mu;
int g_keyval = MPI_KEYVAL_INVALID;
std::set<CommState*> g_states;  // every state attached to a live communicator

// This process could not join the servers once (they are down or unreachable from here): later
// communicators stay with MPI at once instead of waiting the connect timeout again.
std::atomic<bool> g_servers_failed{false};
// Rank 0 of a communicator that stays with MPI for that reason has said so (once per process).
std::atomic<bool> g_fallback_reported{false};

Config LoadConfig() {
  Config c;
  Status st = ApplyEnvironment(&c.client);
  if (!st.ok()) {
    std::fprintf(stderr, "optcast-mpi: %s; every collective stays with MPI\n", st.message().c_str());
    c.why_off = st.message();
    return c;
  }
  int64_t v = 0;
  if (!GetEnvInt("OPTCAST_MPI_DISABLE", 0, &v).ok() || v != 0) {
    c.why_off = "OPTCAST_MPI_DISABLE is set";
    return c;
  }
  if (auto one_host = GetEnv("OPTCAST_MPI_ONE_HOST")) {
    if (*one_host != "servers" && *one_host != "mpi") {
      std::fprintf(stderr,
                   "optcast-mpi: OPTCAST_MPI_ONE_HOST='%s' is neither 'mpi' nor 'servers'; every collective "
                   "stays with MPI\n",
                   one_host->c_str());
      c.why_off = "OPTCAST_MPI_ONE_HOST is neither 'mpi' nor 'servers'";
      return c;
    }
    c.one_host_to_servers = *one_host == "servers";
  }
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
  if (!c.enabled) c.why_off = "OPTCAST_SERVERS is not set";
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
    // Every rank of a communicator on one host: MPI's shared memory wins (the line at MPI_Init
    // said so for MPI_COMM_WORLD). Every rank computes the same answer.
    const bool stay = !GetConfig().one_host_to_servers && OnOneHost(comm);
    bool ok = false;
    if (!stay && !g_servers_failed.load()) {
      Status st = Communicator::Create(opts, &client);
      ok = st.ok();
      if (!ok && !g_servers_failed.exchange(true)) {
        std::fprintf(stderr,
                     "optcast-mpi: rank %d of a communicator of %d could not join the reduction servers: %s; "
                     "this process keeps its collectives in MPI from now on\n",
                     state->rank, state->size, st.ToString().c_str());
      }
    }
    // All ranks route or none does.
    int all_ok = ok ? 1 : 0;
    PMPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (all_ok) {
      state->client = std::move(client);
    } else if (!stay && state->rank == 0 && !g_fallback_reported.exchange(true)) {
      std::fprintf(stderr,
                   "optcast-mpi: a communicator of %d ranks keeps its collectives in MPI because not every "
                   "rank reached OPTCAST_SERVERS (see the errors above); so will later communicators with such "
                   "a rank\n",
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

bool OnOneHost(MPI_Comm comm) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  MPI_Comm local = MPI_COMM_NULL;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) != MPI_SUCCESS) return false;
  int local_size = 0;
  PMPI_Comm_size(local, &local_size);
  PMPI_Comm_free(&local);
  return local_size == size;
}

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
