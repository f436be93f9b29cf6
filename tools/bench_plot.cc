// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/bench_plot.h"

#include <fmt/format.h>

#include <algorithm>

#include "tools/plot/line_plot.h"

namespace optcast::tools {

std::string BenchPlotTitle(const BenchOptions& opts, int nranks, size_t nservers) {
  return fmt::format("AllReduce {} {}, {}{}", DataTypeName(opts.dtype), RedOpName(opts.op), Counted(nranks, "rank"),
                     nservers > 0 ? ", " + Counted(nservers, "reduction server") : "");
}

Status WriteBenchPlot(const std::string& path, const BenchOptions& opts, int nranks, size_t nservers,
                      const std::vector<BenchRow>& rows) {
  std::vector<std::string> algos;
  for (const auto& r : rows) {
    if (std::find(algos.begin(), algos.end(), r.algo) == algos.end()) algos.push_back(r.algo);
  }
  LinePlot plot;
  plot.title = BenchPlotTitle(opts, nranks, nservers);
  PlotPanel algbw{"algbw: message size / time", "algbw (GB/s)", {}, 0};
  PlotPanel busbw{"busbw: algbw x 2(n-1)/n, comparable across rank counts", "busbw (GB/s)", {}, 0};
  for (size_t i = 0; i < algos.size(); ++i) {
    const std::string title = algos[i] == "server"        ? "reduction servers"
                              : algos[i] == "server-bf16" ? "reduction servers, bf16 wire"
                              : algos[i] == "ring"        ? "ring"
                                                          : algos[i];
    PlotSeries a{title, PlotColor(i), {}, false, true};
    PlotSeries b = a;
    for (const auto& r : rows) {
      if (r.algo != algos[i]) continue;
      a.points.emplace_back(static_cast<double>(r.bytes), r.algbw_gbps);
      b.points.emplace_back(static_cast<double>(r.bytes), r.busbw_gbps);
    }
    algbw.series.push_back(std::move(a));
    busbw.series.push_back(std::move(b));
  }
  plot.panels = {algbw, busbw};
  plot.panel_width = 720;
  plot.height = 520;
  return WriteLinePlot(path, plot);
}

}  // namespace optcast::tools
