// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "mpi/mpi_types.h"

#include <cstdint>

namespace optcast::mpi {
namespace {

template <typename T>
constexpr DataType IntegerType() {
  constexpr bool kSigned = static_cast<T>(-1) < static_cast<T>(0);
  if constexpr (sizeof(T) == 1) return kSigned ? DataType::kInt8 : DataType::kUInt8;
  if constexpr (sizeof(T) == 4) return kSigned ? DataType::kInt32 : DataType::kUInt32;
  static_assert(sizeof(T) == 1 || sizeof(T) == 4 || sizeof(T) == 8, "unexpected integer size");
  return kSigned ? DataType::kInt64 : DataType::kUInt64;
}

}  // namespace

std::optional<size_t> PackedNamedTypeSize(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return std::nullopt;
  int nints = 0, naddrs = 0, ntypes = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &nints, &naddrs, &ntypes, &combiner) != MPI_SUCCESS) return std::nullopt;
  if (combiner != MPI_COMBINER_NAMED) return std::nullopt;
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  if (PMPI_Type_size(type, &size) != MPI_SUCCESS || PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS) {
    return std::nullopt;
  }
  // Pair types such as MPI_SHORT_INT have padding: their bytes are not all data.
  if (size <= 0 || lb != 0 || extent != size) return std::nullopt;
  return static_cast<size_t>(size);
}

std::optional<DataType> ReducibleType(MPI_Datatype t) {
  if (t == MPI_FLOAT) return DataType::kFloat32;
  if (t == MPI_DOUBLE) return DataType::kFloat64;
  if (t == MPI_INT8_T || t == MPI_SIGNED_CHAR) return DataType::kInt8;
  if (t == MPI_UINT8_T || t == MPI_UNSIGNED_CHAR) return DataType::kUInt8;
  if (t == MPI_INT32_T) return DataType::kInt32;
  if (t == MPI_UINT32_T) return DataType::kUInt32;
  if (t == MPI_INT64_T) return DataType::kInt64;
  if (t == MPI_UINT64_T) return DataType::kUInt64;
  if (t == MPI_INT) return IntegerType<int>();
  if (t == MPI_UNSIGNED) return IntegerType<unsigned>();
  if (t == MPI_LONG) return IntegerType<long>();
  if (t == MPI_UNSIGNED_LONG) return IntegerType<unsigned long>();
  if (t == MPI_LONG_LONG || t == MPI_LONG_LONG_INT) return IntegerType<long long>();
  if (t == MPI_UNSIGNED_LONG_LONG) return IntegerType<unsigned long long>();
  if (t == MPI_AINT) return IntegerType<MPI_Aint>();
  if (t == MPI_OFFSET) return IntegerType<MPI_Offset>();
  return std::nullopt;
}

std::optional<RedOp> ReducibleOp(MPI_Op op) {
  if (op == MPI_SUM) return RedOp::kSum;
  if (op == MPI_PROD) return RedOp::kProd;
  if (op == MPI_MIN) return RedOp::kMin;
  if (op == MPI_MAX) return RedOp::kMax;
  return std::nullopt;
}

}  // namespace optcast::mpi
