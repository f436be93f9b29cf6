// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "soak_workload.h"

#include <iterator>
#include <random>
#include <vector>

#include "harness.h"

namespace optcast::daemon {

CollPlan PlanFor(uint64_t job_seed, int i, double allreduce_share, size_t max_count) {
  std::mt19937_64 rng(job_seed * 1000003 + static_cast<uint64_t>(i));
  static const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
                                    DataType::kInt8,    DataType::kInt32,   DataType::kUInt64};
  CollPlan p;
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  p.coll = u < allreduce_share                               ? CollType::kAllReduce
           : u < allreduce_share + (1 - allreduce_share) / 2 ? CollType::kReduceScatter
                                                             : CollType::kAllGather;
  p.dtype = kTypes[rng() % std::size(kTypes)];
  p.op = static_cast<RedOp>(rng() % kNumRedOps);
  if (!IsRedOpDefinedFor(p.op, p.dtype)) p.op = RedOp::kSum;  // a bitwise op drawn for a float type
  // Mostly small, sometimes up to max_count: many chunks and many windows.
  const int scale = static_cast<int>(rng() % 4);
  const size_t limit = scale == 0 ? 16 : scale == 1 ? 4096 : scale == 2 ? 65536 : max_count;
  p.count = 1 + rng() % std::min(limit, max_count);
  p.in_place = p.coll == CollType::kAllReduce && rng() % 2 == 0;
  p.seed = rng();
  return p;
}

Status RunChecked(Communicator& comm, const CollPlan& p, int nranks, int rank, std::string* wrong) {
  const size_t es = DataTypeSize(p.dtype);
  wrong->clear();
  Status st;
  if (p.coll == CollType::kAllReduce) {
    std::vector<uint8_t> in(p.count * es), out(p.in_place ? 0 : p.count * es);
    uint8_t* recv = p.in_place ? in.data() : out.data();
    e2e::FillInput(p.dtype, p.op, p.seed, rank, 0, p.count, in.data());
    st = comm.AllReduce(in.data(), recv, p.count, p.dtype, p.op);
    if (st.ok()) *wrong = e2e::VerifyReduction(recv, p.dtype, p.op, p.seed, nranks, 0, p.count);
  } else if (p.coll == CollType::kReduceScatter) {
    std::vector<uint8_t> in(p.count * nranks * es), out(p.count * es);
    e2e::FillInput(p.dtype, p.op, p.seed, rank, 0, p.count * nranks, in.data());
    st = comm.ReduceScatter(in.data(), out.data(), p.count, p.dtype, p.op);
    if (st.ok()) {
      *wrong = e2e::VerifyReduction(out.data(), p.dtype, p.op, p.seed, nranks, static_cast<uint64_t>(rank) * p.count,
                                    p.count);
    }
  } else {
    std::vector<uint8_t> in(p.count * es), out(p.count * nranks * es);
    e2e::FillInput(p.dtype, RedOp::kSum, p.seed, rank, 0, p.count, in.data());
    st = comm.AllGather(in.data(), out.data(), p.count, p.dtype);
    if (st.ok()) *wrong = e2e::VerifyAllGather(out.data(), p.dtype, p.seed, nranks, p.count);
  }
  return st;
}

std::string Describe(const CollPlan& p) {
  return std::string(CollTypeName(p.coll)) + (p.in_place ? " (in place)" : "") + " of " + std::to_string(p.count) +
         " " + DataTypeName(p.dtype);
}

}  // namespace optcast::daemon
