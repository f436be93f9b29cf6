// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Per-communicator state of the MPI interposer: one Optcast job per MPI communicator, its id
// agreed through the communicator itself the first time a collective on it qualifies.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "optcast/communicator.h"

namespace optcast::mpi {

// Settings read once from the environment.
struct Config {
  bool enabled = false;      // OPTCAST_SERVERS is set and OPTCAST_MPI_DISABLE is not
  std::string why_off;       // when not enabled: why, for the line at MPI_Init
  size_t min_bytes = 0;      // OPTCAST_MPI_MIN_BYTES: smaller collectives stay with MPI
  bool print_stats = false;  // OPTCAST_MPI_STATS=1: counters on stderr at MPI_Finalize
  // OPTCAST_MPI_ONE_HOST=servers: use the servers even for a communicator whose ranks all run on
  // one host (by default those stay with MPI, whose shared memory is faster there).
  bool one_host_to_servers = false;
  CommunicatorOptions client;
};
const Config& GetConfig();

// Whether every rank of `comm` runs on one host. Collective over `comm`.
bool OnOneHost(MPI_Comm comm);

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
  std::unique_ptr<Communicator> client;  // null when this communicator stays with MPI
};

// The state of `comm`, created on first use: collective over `comm`, so every rank must call it
// at the same collective. Returns null when the communicator stays with MPI (one rank, an
// intercommunicator, every rank on one host, or a rank that could not reach the servers: then
// each rank says why, once per process; a rank that failed once does not try again).
CommState* GetCommState(MPI_Comm comm);

// Leaves every job (before PMPI_Finalize).
void ReleaseAllCommStates();

}  // namespace optcast::mpi
