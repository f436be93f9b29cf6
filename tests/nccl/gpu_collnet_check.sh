#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
# GPU check of libnccl-net-optcast.so: two optcast servers on loopback, two processes on GPU 0
# that NCCL takes for two nodes (different NCCL_HOSTID), an in-place NCCL AllReduce with
# CollNet forced (NCCL_ALGO=CollNetChain). Passes when both ranks get exact results, NCCL
# reports "Connected CollNet", the plugin reports "CollNet active" and the servers saw the job.
# Needs CUDA (CUDA_HOME, default /usr/local/cuda) and NCCL headers + library (NCCL_HOME, else
# /usr or the nvidia-nccl Python wheel). Not part of ctest: there is no GPU in CI.
#
#   tests/nccl/gpu_collnet_check.sh [BUILD_DIR]
#
# OPTCAST_CHECK_KEEP=DIR keeps the ranks' and servers' logs there (they are removed otherwise).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-gpu-check}
CUDA=${CUDA_HOME:-/usr/local/cuda}
PORT=${OPTCAST_CHECK_PORT:-18918}
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in ${PIDS[@]+"${PIDS[@]}"}; do kill "$p" 2>/dev/null || true; done
  if [ -n "${OPTCAST_CHECK_KEEP:-}" ]; then mkdir -p "$OPTCAST_CHECK_KEEP" && cp "$WORK"/*.log "$OPTCAST_CHECK_KEEP"/ 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# 1. The project: the optcast command and the plugin. A BUILD_DIR that already holds both (built
# on another machine, with the libraries the command needs on LD_LIBRARY_PATH) is used as it is,
# for GPU machines that lack the project's build dependencies.
OPTCAST=$(find "$BUILD" -type f -name optcast -perm -u+x 2>/dev/null | head -1)
PLUGIN=$(find "$BUILD" -name libnccl-net-optcast.so 2>/dev/null | head -1)
if [ -z "$OPTCAST" ] || [ -z "$PLUGIN" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DOPTCAST_BUILD_TESTS=OFF -DOPTCAST_BUILD_BENCH=OFF >/dev/null
  cmake --build "$BUILD" --parallel --target optcast nccl-net-optcast >/dev/null
  OPTCAST=$(find "$BUILD" -type f -name optcast -perm -u+x | head -1)
  PLUGIN=$(find "$BUILD" -name libnccl-net-optcast.so | head -1)
fi

# 2. The test program, against CUDA and NCCL.
NCCL_DIRS="${NCCL_HOME:-} /usr/local/nccl /usr $CUDA"
if PY=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null); then
  NCCL_DIRS="$NCCL_DIRS $PY"
fi
NCCL_INC="" NCCL_SO=""
for d in $NCCL_DIRS; do
  [ -z "$NCCL_INC" ] && [ -f "$d/include/nccl.h" ] && NCCL_INC=$d/include
  for so in "$d"/lib/libnccl.so* "$d"/lib64/libnccl.so* "$d"/lib/*-linux-gnu/libnccl.so*; do
    [ -z "$NCCL_SO" ] && [ -f "$so" ] && NCCL_SO=$so
  done
done
if [ -z "$NCCL_INC" ] || [ -z "$NCCL_SO" ]; then echo "FAIL: NCCL not found; set NCCL_HOME" >&2; exit 1; fi
g++ -std=c++17 -O2 -I"$CUDA/include" -I"$NCCL_INC" "$ROOT/tests/nccl/gpu_allreduce.cc" -o "$WORK/gpu_allreduce" \
  -L"$CUDA/lib64" -lcudart "$NCCL_SO" -Wl,-rpath,"$CUDA/lib64:$(dirname "$NCCL_SO")"

# 3. Two reduction servers.
for i in 0 1; do
  "$OPTCAST" server --listen "127.0.0.1:$((PORT + i))" --log-level info >"$WORK/server$i.log" 2>&1 &
  PIDS+=($!)
done
sleep 1

# 4. Two ranks on GPU 0, posing as two nodes.
export NCCL_NET_PLUGIN=$PLUGIN NCCL_COLLNET_ENABLE=1 NCCL_ALGO=${NCCL_ALGO:-CollNetChain}
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING NCCL_SOCKET_IFNAME=lo NCCL_MNNVL_ENABLE=0
export OPTCAST_SERVERS=127.0.0.1:$PORT,127.0.0.1:$((PORT + 1)) OPTCAST_TIMEOUT_MS=120000
RANKS=()
for r in 0 1; do
  NCCL_HOSTID=optcast-gpu-check-node$r timeout 300 "$WORK/gpu_allreduce" $r 2 "$WORK/id" >"$WORK/rank$r.log" 2>&1 &
  RANKS+=($!)
done
ok=1
for r in 0 1; do
  if ! wait "${RANKS[$r]}"; then echo "rank $r failed (exit code above 0; see its log below)"; ok=0; fi
done

# 5. The evidence.
check() {  # check DESCRIPTION PATTERN FILE...
  local what=$1 pattern=$2; shift 2
  if grep -h -m1 -E "$pattern" "$@"; then echo "  ok: $what"; else echo "  MISSING: $what"; ok=0; fi
}
check "results exact on rank 0" "AllReduce of .* OK" "$WORK/rank0.log"
check "results exact on rank 1" "AllReduce of .* OK" "$WORK/rank1.log"
check "plugin joined the servers (rank 0)" "NET/Optcast : CollNet active" "$WORK/rank0.log"
check "plugin joined the servers (rank 1)" "NET/Optcast : CollNet active" "$WORK/rank1.log"
check "NCCL connected CollNet" "Connected CollNet|via COLLNET/" "$WORK/rank0.log" "$WORK/rank1.log"
check "servers saw the job" "job .* created \(2 ranks\)" "$WORK/server0.log" "$WORK/server1.log"
# For the record: which tables NCCL loaded and the algorithm it picked (older NCCL word these differently).
grep -h -m3 -E "Loaded (coll|collnet|net) plugin|AllReduce: .*Algo" "$WORK/rank0.log" || true
if [ "$ok" != 1 ]; then
  for f in "$WORK"/rank*.log "$WORK"/server*.log; do echo "==== $f"; grep -E "WARN|Optcast|CollNet|Plugin|NET/|rank|error" "$f" | tail -60; done
  echo "FAIL"
  exit 1
fi
echo "PASS: NCCL AllReduce over CollNet through Optcast servers"
