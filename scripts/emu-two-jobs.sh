#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#
# A small job next to a stream (docs/benchmarks.md, "A small job next to a stream"): two jobs share
# 4 reduction servers on the emulated cluster. The stream's 4 ranks (hosts w0-w3) run 64 MiB
# AllReduces back to back; the small job's 4 ranks (w4-w7) run 8 B to 32 KiB AllReduces. Each job
# runs alone first, then the small one while the stream runs. Prints the small job's time per
# size alone and beside the stream, and the stream's time per 64 MiB alone and shared.
#
#   sudo chrt -r 10 scripts/emu-two-jobs.sh
#
# Environment: RATE (500mbit), MTU (1500), ROUNDS (2), EMU_ARGS (more `optcast emu up` flags, e.g.
# "--burst 3028 --queue-packets 100", or "--priority-dscp off" for switch ports and host queues
# that do not serve the small job's DSCP first), OPTCAST_BIN. Client variables (OPTCAST_CHUNK_BYTES, ...)
# reach the ranks of both jobs unchanged; STREAM_ENV and SMALL_ENV give one job's ranks more, e.g.
# STREAM_ENV="OPTCAST_CHUNK_BYTES=16384".
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OPTCAST="${OPTCAST_BIN:-$ROOT/build/tools/optcast}"
RATE="${RATE:-500mbit}"
MTU="${MTU:-1500}"
ROUNDS="${ROUNDS:-2}"
read -r -a EMU_ARGS <<<"${EMU_ARGS:-}"
read -r -a STREAM_ENV <<<"${STREAM_ENV:-}"
read -r -a SMALL_ENV <<<"${SMALL_ENV:-}"

if [[ $(id -u) -ne 0 ]]; then
  echo "emu-two-jobs: needs root for network namespaces and tc; run: sudo $0" >&2
  exit 1
fi
if [[ ! -x "$OPTCAST" ]]; then
  echo "emu-two-jobs: $OPTCAST not found; build first (scripts/build.sh) or set OPTCAST_BIN" >&2
  exit 1
fi

OUT=$(mktemp -d /tmp/optcast-two-jobs-XXXXXX)
server_pids=()
cleanup() {
  for p in "${server_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  "$OPTCAST" emu down >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

"$OPTCAST" emu up --workers 8 --servers 4 --rate "$RATE" --mtu "$MTU" "${EMU_ARGS[@]}" >/dev/null
servers=""
for j in 0 1 2 3; do
  addr="10.99.0.$((101 + j)):8918"
  ip netns exec "optcast-emu-s$j" "$OPTCAST" server --listen "$addr" --insecure --link-rate "$RATE" >"$OUT/server$j.log" 2>&1 &
  server_pids+=($!)
  servers+="${servers:+,}$addr"
done
sleep 1

# job NAME FIRST_WORKER VAR=VALUE... -- BENCH_ARGS...: runs 4 ranks on hosts wFIRST..wFIRST+3 with
# those variables set; rank 0's table in $OUT/NAME.txt.
job() {
  local name=$1 first=$2
  shift 2
  local vars=()
  while [[ $1 != -- ]]; do
    vars+=("$1")
    shift
  done
  shift
  local pids=() r
  for r in 0 1 2 3; do
    ip netns exec "optcast-emu-w$((first + r))" env "${vars[@]}" "$OPTCAST" bench --algo server --rank "$r" --nranks 4 \
      --rendezvous "10.99.0.$((first + 1)):29500" --servers "$servers" --progress off "$@" \
      >"$OUT/$name.rank$r.txt" 2>&1 &
    pids+=($!)
  done
  local status=0
  for r in "${pids[@]}"; do wait "$r" || status=1; done
  cp "$OUT/$name.rank0.txt" "$OUT/$name.txt"
  if ((status != 0)); then
    echo "emu-two-jobs: job $name failed; logs in $OUT" >&2
    tail -n 5 "$OUT/$name".rank*.txt >&2
    exit 1
  fi
}
small() { job "$1" 4 "${SMALL_ENV[@]}" -- -b 8 -e 32K -f 4 -n 100 -w 5; }
stream() { job "$1" 0 "${STREAM_ENV[@]}" -- -b 64M -e 64M -n 12 -w 2; }
# "size time_us" per row of a bench table.
times() { awk '/^ +[0-9]/ && NF > 6 { print $1, $5 }' "$OUT/$1.txt"; }

for ((round = 1; round <= ROUNDS; ++round)); do
  small "small-alone-$round"
  stream "stream-alone-$round"
  stream "stream-shared-$round" &
  stream_pid=$!
  sleep 3 # past the stream's warm-up: the small job runs while 64 MiB AllReduces stream
  small "small-shared-$round"
  wait "$stream_pid"
done

echo "# two jobs on 4 shared servers: $RATE, MTU $MTU${EMU_ARGS[*]:+, ${EMU_ARGS[*]}}${STREAM_ENV[*]:+; stream: ${STREAM_ENV[*]}}${SMALL_ENV[*]:+; small job: ${SMALL_ENV[*]}}; time per AllReduce (ms)"
printf "%-10s" "size"
for ((round = 1; round <= ROUNDS; ++round)); do printf "  %12s %12s %7s" "alone-$round" "shared-$round" "x"; done
echo
sizes=$(times small-alone-1 | awk '{ print $1 }')
for size in $sizes; do
  printf "%-10s" "$size"
  for ((round = 1; round <= ROUNDS; ++round)); do
    a=$(times "small-alone-$round" | awk -v s="$size" '$1 == s { print $2 }')
    b=$(times "small-shared-$round" | awk -v s="$size" '$1 == s { print $2 }')
    awk -v a="$a" -v b="$b" 'BEGIN { printf "  %12.3f %12.3f %7.1f", a / 1000, b / 1000, b / a }'
  done
  echo
done
for ((round = 1; round <= ROUNDS; ++round)); do
  a=$(times "stream-alone-$round" | awk '{ print $2 }')
  b=$(times "stream-shared-$round" | awk '{ print $2 }')
  awk -v r="$round" -v a="$a" -v b="$b" \
    'BEGIN { printf "stream 64 MiB, round %d: %.3f s alone, %.3f s shared (%.1f%% of its bandwidth)\n", r, a / 1e6, b / 1e6, 100 * a / b }'
done
echo "# logs: $OUT"
