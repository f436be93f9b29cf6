#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
# The headline measurement on an emulated cluster (network namespaces + HTB-limited links):
# reduction servers vs the Optcast ring vs Gloo's ring, float32 sum, 1 MiB .. 64 MiB,
# n = 4 and 8 workers with S = n servers, plus S = n/2 and S = 1 at n = 8 (servers only).
# Writes one JSON, one PNG and one table per configuration under the results directory.
#
#   sudo scripts/emu-bench.sh [RESULTS_DIR]
#   env: RATE (default 200mbit), ITERS (20), WARMUP (5), BURST (the links' HTB burst in bytes,
#        default the emulator's), OPTCAST_BIN, OPTCAST_GLOO_BENCH, and the
#        client's OPTCAST_CHUNK_BYTES / OPTCAST_WINDOW, which reach the ranks unchanged.
#
# Why 200mbit: every emulated link is forwarded by this machine's CPUs (veth + bridge + HTB in
# softirq). With 8 workers and 8 servers at 500mbit that alone took ~60% of 2 cores and the
# pipelined server path lost throughput to CPU waits; at 200mbit it stays around a quarter.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RATE="${RATE:-200mbit}"
ITERS="${ITERS:-20}"
WARMUP="${WARMUP:-5}"
BURST="${BURST:-}"
OUT="${1:-$ROOT/build/emu-results/$(date +%Y%m%d-%H%M%S)}"  # build* is git-ignored
OPTCAST="${OPTCAST_BIN:-$ROOT/build/tools/optcast}"
GLOO="${OPTCAST_GLOO_BENCH:-$(dirname "$OPTCAST")/gloo/optcast-gloo-bench}"

if [[ $(id -u) -ne 0 ]]; then
  echo "emu-bench: needs root for network namespaces and tc; run: sudo $0 $*" >&2
  exit 1
fi
if [[ ! -x "$OPTCAST" ]]; then
  echo "emu-bench: $OPTCAST not found; build first (scripts/build.sh) or set OPTCAST_BIN" >&2
  exit 1
fi
GLOO_ARGS=()
if [[ -x "$GLOO" ]]; then
  GLOO_ARGS=(--gloo-bench "$GLOO")
else
  echo "emu-bench: $GLOO not found (libgloo-dev missing?): the Gloo baseline is skipped" >&2
fi
PLOT=1
command -v gnuplot >/dev/null || { PLOT=0; echo "emu-bench: gnuplot not found (apt-get install gnuplot-nox): no PNGs" >&2; }

# Whatever happens, leave no namespaces behind.
trap '"$OPTCAST" emu down >/dev/null 2>&1 || true' EXIT INT TERM

mkdir -p "$OUT"
echo "# emu-bench: rate $RATE${BURST:+, link burst $BURST bytes}, results in $OUT"
echo "# $(date -Iseconds) $(uname -r) $(nproc) CPUs:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "# client settings: OPTCAST_CHUNK_BYTES=${OPTCAST_CHUNK_BYTES:-auto} OPTCAST_WINDOW=${OPTCAST_WINDOW:-default}"

run() {  # name workers servers algos iters warmup
  local name=$1 w=$2 s=$3 algos=$4 iters=$5 warmup=$6
  local args=(emu run --workers "$w" --servers "$s" --rate "$RATE" -b 1M -e 64M -f 4 -n "$iters" -w "$warmup"
              --algo "$algos" --json "$OUT/$name.json" "${GLOO_ARGS[@]}")
  [[ -n $BURST ]] && args+=(--burst "$BURST")
  ((PLOT)) && args+=(--plot "$OUT/$name.png")
  echo
  echo "## $name: $w workers, $s servers, $algos"
  "$OPTCAST" "${args[@]}" | tee "$OUT/$name.txt"
}

start=$(date +%s)
run n4-s4 4 4 server,ring,gloo "$ITERS" "$WARMUP"
run n8-s8 8 8 server,ring,gloo "$ITERS" "$WARMUP"
run n8-s4 8 4 server "$ITERS" "$WARMUP"
run n8-s1 8 1 server "$(( (ITERS + 3) / 4 ))" "$(( (WARMUP + 1) / 2 ))"  # 8x the bytes per server link: fewer iterations keep it short
echo
echo "# emu-bench: done in $(( $(date +%s) - start )) s; results in $OUT"
