// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Which MPI datatypes and ops the reduction servers can take, and how they map onto Optcast's.

#include <mpi.h>

#include <cstddef>
#include <optional>

#include "optcast/types.h"

namespace optcast::mpi {

// A predefined (named) datatype whose elements are packed with no gaps: its size in bytes.
std::optional<size_t> PackedNamedTypeSize(MPI_Datatype type);

// The Optcast element type for a predefined MPI arithmetic type (float, double, 8/32/64-bit
// integers of either signedness); nullopt for everything else (short, long double, pairs, ...).
std::optional<DataType> ReducibleType(MPI_Datatype type);

// MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX; nullopt for logical/bitwise ops and user-defined ops.
std::optional<RedOp> ReducibleOp(MPI_Op op);

}  // namespace optcast::mpi
