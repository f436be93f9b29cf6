// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Line charts as PNG files, drawn by gnuplot: what `optcast bench --plot` and `optcast emu run
// --plot` draw (bandwidth against message size, one line per algorithm).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "optcast/status.h"

namespace optcast::tools {

struct PlotSeries {
  std::string title;
  std::string color;  // "#1f77b4"
  std::vector<std::pair<double, double>> points;
  bool dashed = false;  // a reference line (a bound) rather than a measurement
  bool markers = true;
};

struct PlotPanel {
  std::string title;
  std::string ylabel;
  // x is a message size in bytes: log2 axis, ticks labelled 1K, 1M, ...
  std::vector<PlotSeries> series;
  double ymax = 0;  // 0: from the data
};

struct LinePlot {
  std::string title;
  std::vector<PlotPanel> panels;  // side by side
  std::string key = "top left";   // where the legend goes (gnuplot's `set key` position)
  int panel_width = 800;
  int height = 560;
};

// Colours that stay apart on screen and in print, for series in order.
const char* PlotColor(size_t i);

// "8", "64K", "1M", "2G" for a byte count.
std::string SizeLabel(double bytes);

// "1 rank", "4 ranks": a count and its noun, for titles and legends.
std::string Counted(uint64_t n, const std::string& noun);

// Draws `plot` into `png_path`. Needs gnuplot (Debian gnuplot-nox); the error says so.
Status WriteLinePlot(const std::string& png_path, const LinePlot& plot);

}  // namespace optcast::tools
