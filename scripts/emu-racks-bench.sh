#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
# The oversubscribed emulated cluster that optcast-sim is calibrated against (docs/scale.md,
# "Calibration"): 2 racks of 4 workers, host links and rack uplinks at RATE (4 host ports per
# uplink: 4:1), flat servers (8, in 2 racks of their own), trees (2 leaves per rack, 2 roots
# spread over the racks; and 1 leaf per rack, 1 root), Optcast's ring and Gloo's ring, 1 MiB .. 64 MiB.
# Writes one JSON and one table per configuration and sim/data's CSV rows (racks.csv) under the
# results directory.
#
#   sudo chrt -r 10 scripts/emu-racks-bench.sh [RESULTS_DIR]
#   env: RATE (default 200mbit), UPLINK (default RATE: 4:1), ITERS (3), WARMUP (1), OPTCAST_BIN,
#        OPTCAST_GLOO_BENCH
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RATE="${RATE:-200mbit}"
UPLINK="${UPLINK:-$RATE}"
ITERS="${ITERS:-3}"
WARMUP="${WARMUP:-1}"
OUT="${1:-$ROOT/build/emu-results/racks-$(date +%Y%m%d-%H%M%S)}"  # build* is git-ignored
OPTCAST="${OPTCAST_BIN:-$ROOT/build/tools/optcast}"
GLOO="${OPTCAST_GLOO_BENCH:-$(dirname "$OPTCAST")/gloo/optcast-gloo-bench}"

if [[ $(id -u) -ne 0 ]]; then
  echo "emu-racks-bench: needs root for network namespaces and tc; run: sudo $0 $*" >&2
  exit 1
fi
if [[ ! -x "$OPTCAST" ]]; then
  echo "emu-racks-bench: $OPTCAST not found; build first (scripts/build.sh) or set OPTCAST_BIN" >&2
  exit 1
fi
ALGOS=server,ring
GLOO_ARGS=()
if [[ -x "$GLOO" ]]; then
  GLOO_ARGS=(--gloo-bench "$GLOO")
  ALGOS=server,ring,gloo
fi
trap '"$OPTCAST" emu down >/dev/null 2>&1 || true' EXIT INT TERM

mkdir -p "$OUT"
echo "# emu-racks-bench: 2 racks x 4 workers, links $RATE, uplinks $UPLINK, results in $OUT"
echo "# $(date -Iseconds) $(uname -r) $(nproc) CPUs:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"

run() {  # name servers algos [extra flags]
  local name=$1 s=$2 algos=$3
  shift 3
  echo
  echo "## $name: 8 workers in 2 racks, $s servers, $algos $*"
  "$OPTCAST" emu run --workers 8 --racks 2 --uplink "$UPLINK" --servers "$s" --rate "$RATE" -b 1M -e 64M -f 4 \
    -n "$ITERS" -w "$WARMUP" --algo "$algos" --json "$OUT/$name.json" "${GLOO_ARGS[@]}" "$@" | tee "$OUT/$name.txt"
}

run flat 8 "$ALGOS"
run tree2 6 server --tree
run tree1 3 server --tree

# One CSV row per algorithm and size, as sim/data/emulated-cluster-racks-200mbit.csv holds them.
python3 - "$OUT" <<'PY' | tee "$OUT/racks.csv"
import json, sys, os
out = sys.argv[1]
print("algo,workers,servers,racks,uplink_mbit,bytes,measured_MBps,pct_of_bound,server_delay_us")
for name in ("flat", "tree2", "tree1"):
    j = json.load(open(os.path.join(out, name + ".json")))
    c = j["cluster"]
    for r in j["results"]:
        algo = "tree" if (c["tree"] and r["algo"] == "server") else r["algo"]
        servers = c["servers"] if r["algo"] == "server" else 0
        if name != "flat" and algo != "tree":
            continue
        print(f'{algo},{c["workers"]},{servers},{c["racks"]},{c["uplink_bits"] / 1e6:g},{r["bytes"]},'
              f'{r["algbw_gbps"] * 1e3:.2f},{100 * r["fraction_of_bound"]:.1f},0')
PY
