// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/plot/line_plot.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace optcast::tools {

const char* PlotColor(size_t i) {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
}

std::string SizeLabel(double bytes) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return bytes == std::floor(bytes) ? fmt::format("{}{}", static_cast<uint64_t>(bytes), units[u])
                                    : fmt::format("{:.1f}{}", bytes, units[u]);
}

std::string Counted(uint64_t n, const std::string& noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

namespace {

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Ticks at powers of two, at most about ten of them, labelled as sizes.
std::string SizeTicks(double lo, double hi) {
  const int a = static_cast<int>(std::floor(std::log2(lo)));
  const int b = static_cast<int>(std::ceil(std::log2(hi)));
  const int step = std::max(1, (b - a + 9) / 10);
  std::vector<std::string> ticks;
  for (int e = a; e <= b; e += step)
    ticks.push_back(fmt::format("\"{}\" {}", SizeLabel(std::ldexp(1.0, e)), std::ldexp(1.0, e)));
  return fmt::format("set xtics ({})\n", fmt::join(ticks, ", "));
}

}  // namespace

Status WriteLinePlot(const std::string& png_path, const LinePlot& plot) {
  double lo = 0, hi = 0;
  for (const auto& p : plot.panels) {
    for (const auto& s : p.series) {
      if (s.dashed) continue;
      for (const auto& [x, y] : s.points) {
        lo = lo == 0 ? x : std::min(lo, x);
        hi = std::max(hi, x);
      }
    }
  }
  if (hi <= 0) return InvalidArgument("nothing to plot: no results");
  if (hi == lo) hi = lo * 2;
  std::string gp;
  const int width = plot.panel_width * static_cast<int>(std::max<size_t>(1, plot.panels.size()));
  gp += fmt::format("set terminal pngcairo size {},{} enhanced font 'sans,11'\n", width, plot.height);
  gp += "set output " + Quote(png_path) + "\n";
  gp += fmt::format("set multiplot layout 1,{} title {} font 'sans,13'\n", std::max<size_t>(1, plot.panels.size()),
                    Quote(plot.title));
  gp += "set logscale x 2\nset xlabel 'message size (bytes)'\nset grid\n";
  gp += "set key " + plot.key + "\n";
  gp += fmt::format("set xrange [{}:{}]\n", lo / 1.5, hi * 1.5);
  gp += SizeTicks(lo, hi);
  for (const auto& p : plot.panels) {
    gp += "set title " + Quote(p.title) + "\n";
    gp += "set ylabel " + Quote(p.ylabel) + "\n";
    gp += p.ymax > 0 ? fmt::format("set yrange [0:{}]\n", p.ymax) : "set yrange [0:*]\n";
    std::vector<std::string> items;
    for (const auto& s : p.series) {
      // Inline data ('-'), one block per series after the plot command.
      std::string style = s.dashed    ? "with lines dt 2 lw 1.5"
                          : s.markers ? "with linespoints lw 2 pt 7 ps 0.8"
                                      : "with lines lw 2";
      items.push_back(fmt::format("'-' using 1:2 {} lc rgb {} title {}", style, Quote(s.color), Quote(s.title)));
    }
    if (items.empty()) continue;
    gp += "plot " + fmt::format("{}", fmt::join(items, ", ")) + "\n";
    for (const auto& s : p.series) {
      for (const auto& [x, y] : s.points) gp += fmt::format("{} {}\n", x, y);
      gp += "e\n";
    }
  }
  gp += "unset multiplot\n";

  // gnuplot reads the script on stdin; its own messages go to our stderr.
  FILE* pipe = ::popen("gnuplot", "w");
  if (pipe == nullptr) return UnavailableError("cannot start gnuplot; install it: apt-get install gnuplot-nox");
  std::fwrite(gp.data(), 1, gp.size(), pipe);
  const int rc = ::pclose(pipe);
  if (rc != 0) {
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 127) {
      return UnavailableError("plots need gnuplot, which is not installed: apt-get install gnuplot-nox");
    }
    return InternalError(fmt::format("gnuplot failed drawing {} (status {}); its messages are above", png_path, rc));
  }
  return Status::Ok();
}

}  // namespace optcast::tools
