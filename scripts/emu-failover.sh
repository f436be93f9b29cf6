#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
# Time to recover from a dead reduction server, on an emulated cluster: W workers run a bench of
# one size over S servers; once rank 0 has timed KILL_AFTER iterations, the last server is
# SIGKILLed. Rank 0 writes every timed iteration's wall-clock end and duration
# (`optcast bench --iteration-times`); the summary gives the iterations around the kill, the time
# from the kill until the job is back at its new full speed, and the bandwidth before and after
# against the bound for S and S - 1 servers (R·min(S, W)/W), from scripts/emu_failover_summary.py.
#
#   sudo flock /tmp/optcast-emu.lock chrt -r 10 scripts/emu-failover.sh [RESULTS_DIR]
#   env: WORKERS (4), SERVERS (3), RATE (200mbit), SIZE (16M), ITERS (40), KILL_AFTER (12),
#        OPTCAST_BIN
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORKERS="${WORKERS:-4}"
SERVERS="${SERVERS:-3}"
RATE="${RATE:-200mbit}"
SIZE="${SIZE:-16M}"
ITERS="${ITERS:-40}"
KILL_AFTER="${KILL_AFTER:-12}"
OUT="${1:-$ROOT/build/emu-failover/$(date +%Y%m%d-%H%M%S)}"  # build* is git-ignored
OPTCAST="${OPTCAST_BIN:-$ROOT/build/tools/optcast}"
PORT=8918

if [[ $(id -u) -ne 0 ]]; then
  echo "emu-failover: needs root for network namespaces and tc; run: sudo $0 $*" >&2
  exit 1
fi
if [[ ! -x "$OPTCAST" ]]; then
  echo "emu-failover: $OPTCAST not found; build first (scripts/build.sh) or set OPTCAST_BIN" >&2
  exit 1
fi
if ((SERVERS < 2)); then
  echo "emu-failover: SERVERS=$SERVERS: failover needs at least 2 servers" >&2
  exit 1
fi
mkdir -p "$OUT"

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$OPTCAST" emu down >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$OPTCAST" emu up --workers "$WORKERS" --servers "$SERVERS" --rate "$RATE" >"$OUT/emu-up.log"
# The hosts talk over a (virtual) network: servers and ranks share a fresh secret.
head -c 32 /dev/urandom | base64 >"$OUT/secret"
chmod 600 "$OUT/secret"
export OPTCAST_SECRET_FILE="$OUT/secret"

server_addr() { echo "10.99.0.$((101 + $1)):$PORT"; }
SERVER_LIST=""
SERVER_PIDS=()
for ((j = 0; j < SERVERS; j++)); do
  ip netns exec "optcast-emu-s$j" "$OPTCAST" server --listen "$(server_addr "$j")" --timeout-ms 60000 \
    --log-level warn --link-rate "$RATE" >"$OUT/server-$j.log" 2>&1 &
  SERVER_PIDS+=($!)
  PIDS+=($!)
  SERVER_LIST+="${SERVER_LIST:+,}$(server_addr "$j")"
done
for ((j = 0; j < SERVERS; j++)); do
  for ((t = 0; t < 150; t++)); do
    grep -q "listening on" "$OUT/server-$j.log" && break
    sleep 0.1
  done
  grep -q "listening on" "$OUT/server-$j.log" || { echo "emu-failover: server $j did not start" >&2; exit 1; }
done

ITER_FILE="$OUT/iterations.txt"
RANK_PIDS=()
for ((w = 0; w < WORKERS; w++)); do
  args=(bench --rank "$w" --nranks "$WORKERS" --rendezvous "10.99.0.1:29500" --algo server
    --servers "$SERVER_LIST" -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 2 --timeout-ms 60000 --progress off)
  ((w == 0)) && args+=(--iteration-times "$ITER_FILE")
  ip netns exec "optcast-emu-w$w" "$OPTCAST" "${args[@]}" >"$OUT/rank-$w.log" 2>&1 &
  RANK_PIDS+=($!)
  PIDS+=($!)
done

# Kill the last server once rank 0 has timed KILL_AFTER iterations.
VICTIM=$((SERVERS - 1))
for ((t = 0; t < 6000; t++)); do
  [[ -f "$ITER_FILE" ]] && (($(wc -l <"$ITER_FILE") >= KILL_AFTER)) && break
  sleep 0.05
done
KILL_AT=$(date +%s.%N)
kill -KILL "${SERVER_PIDS[$VICTIM]}"
wait "${SERVER_PIDS[$VICTIM]}" 2>/dev/null || true  # reaped here: no "Killed" notice later
echo "$KILL_AT" >"$OUT/kill-time.txt"

STATUS=0
for p in "${RANK_PIDS[@]}"; do wait "$p" || STATUS=1; done
cat "$OUT/rank-0.log"
if ((STATUS != 0)); then
  echo "emu-failover: a rank failed; logs in $OUT" >&2
  exit 1
fi

python3 "$ROOT/scripts/emu_failover_summary.py" "$OUT" "$WORKERS" "$SERVERS" "$RATE" | tee "$OUT/summary.txt"
