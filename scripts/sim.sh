#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
# The scale study (docs/scale.md) on the SimGrid model: calibration against the emulated cluster,
# then ring, flat servers and trees at n = 64, 256, 1024 with tables, JSON and PNG plots.
#   scripts/sim.sh [OUT_DIR]            full study (builds optcast-sim first)
#   scripts/sim.sh --quick [OUT_DIR]    the same at n = 8, 16, 32 (under a minute)
# Environment: OPTCAST_BUILD_DIR (default build), SIM_JOBS (default 2), SIM_TIMEOUT (seconds of
# wall time per run, default 600; slower runs are listed as left out), SIM_FULL=1 to run whole
# the cells sim/study.py folds or leaves out as costly (docs/scale.md, "Cost" and "The fold").
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
if [[ ${1:-} == --quick ]]; then
  quick=(--quick)
  shift
fi
out=${1:-sim-results}
build=${OPTCAST_BUILD_DIR:-build}
if [[ ! -f $build/build.ninja && ! -f $build/Makefile ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target optcast-sim -j "${SIM_JOBS:-2}"
sim=$build/sim/optcast-sim
mkdir -p "$out"
echo "== calibration against the emulated cluster (docs/emulated-cluster.md)"
python3 sim/calibrate.py "$sim" --markdown | tee "$out/calibration.md"
echo "== scale study"
full=()
[[ ${SIM_FULL:-0} == 1 ]] && full=(--full)
python3 sim/study.py "$sim" "$out" "${quick[@]}" "${full[@]}" --jobs "${SIM_JOBS:-2}" --timeout "${SIM_TIMEOUT:-600}"
echo "results: $out/results.json, $out/tables.md, $out/*.png"
