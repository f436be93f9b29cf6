// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The words of the plots' titles: one of a thing is singular.

#include <gtest/gtest.h>

#include "tools/bench_plot.h"
#include "tools/plot/line_plot.h"

namespace optcast::tools {
namespace {

TEST(PlotTitle, OneOfAThingIsSingular) {
  EXPECT_EQ(Counted(1, "reduction server"), "1 reduction server");
  EXPECT_EQ(Counted(0, "rank"), "0 ranks");
  EXPECT_EQ(Counted(8, "worker"), "8 workers");
  BenchOptions o;
  o.dtype = DataType::kFloat32;
  o.op = RedOp::kSum;
  EXPECT_EQ(BenchPlotTitle(o, 4, 1), "AllReduce float32 sum, 4 ranks, 1 reduction server");
  EXPECT_EQ(BenchPlotTitle(o, 1, 2), "AllReduce float32 sum, 1 rank, 2 reduction servers");
  EXPECT_EQ(BenchPlotTitle(o, 8, 0), "AllReduce float32 sum, 8 ranks");
}

}  // namespace
}  // namespace optcast::tools
