#!/usr/bin/env bash
# In the emulated cluster (root): MPI_Allreduce at 64 MiB with and without liboptcast-mpi.so, and
# DDP step times on the "optcast" and "gloo" torch backends, one rank per worker host.
#   sudo scripts/emu-mpi-torch.sh   # WORKERS=4 SERVERS=4 RATE=500mbit STEPS=10 WIDTH=1024 BATCH=32
#                                   # PARTS=mpi,ddp (either or both)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(realpath "${OPTCAST_BUILD_DIR:-build}")
W=${WORKERS:-4}
S=${SERVERS:-4}
RATE=${RATE:-500mbit}
OPTCAST=$BUILD/tools/optcast
BENCH=$BUILD/bench/mpi/optcast-mpi-allreduce-bench
INTERPOSER=$BUILD/src/mpi/liboptcast-mpi.so
for f in "$OPTCAST" "$BENCH" "$INTERPOSER" "$BUILD/python/optcast_torch/__init__.py"; do
  [[ -e $f ]] || { echo "missing $f: build first (scripts/build.sh)" >&2; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces): run with sudo" >&2; exit 1; }

WORK=$(mktemp -d /tmp/optcast-emu-mpi-XXXXXX)
"$OPTCAST" emu up --workers "$W" --servers "$S" --rate "$RATE"
trap '"$OPTCAST" emu down >/dev/null; rm -rf "$WORK"' EXIT

# The emulated hosts talk over a (virtual) network: servers and ranks share a fresh secret, in a
# file only root can read, as a deployment would.
(umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$WORK/secret")
export OPTCAST_SECRET_FILE=$WORK/secret

servers=()
for ((j = 0; j < S; j++)); do
  addr=10.99.0.$((101 + j)):8918
  ip netns exec "optcast-emu-s$j" "$OPTCAST" server --log-level warn --listen "$addr" >"$WORK/server$j.log" 2>&1 &
  servers+=("$addr")
done
SERVER_LIST=$(IFS=,; echo "${servers[*]}")
sleep 1

# mpirun runs on worker 0 and starts its daemons on the other worker hosts through this "remote
# shell", which enters the host's namespace instead of logging in.
cat >"$WORK/netns-rsh" <<'AGENT'
#!/bin/sh
host=$1; shift
exec ip netns exec "optcast-emu-w$(( ${host##*.} - 1 ))" /bin/sh -c "$*"
AGENT
chmod +x "$WORK/netns-rsh"
for ((i = 0; i < W; i++)); do echo "10.99.0.$((i + 1)) slots=1"; done >"$WORK/hosts"
MPIRUN=(ip netns exec optcast-emu-w0 mpirun.openmpi --allow-run-as-root --hostfile "$WORK/hosts" -np "$W"
        --mca plm_rsh_agent "$WORK/netns-rsh" --mca oob_tcp_if_include 10.99.0.0/24
        --mca btl tcp,self --mca btl_tcp_if_include 10.99.0.0/24)

PARTS=${PARTS:-mpi,ddp}
if [[ $PARTS == *mpi* ]]; then
echo "== MPI_Allreduce, $W worker hosts, $S server hosts, $RATE links: Open MPI alone"
"${MPIRUN[@]}" "$BENCH" -b 64M -e 64M -n 3 -w 1 | tee "$WORK/mpi.txt"
echo "== the same with liboptcast-mpi.so (OPTCAST_SERVERS=$SERVER_LIST)"
"${MPIRUN[@]}" -x LD_PRELOAD="$INTERPOSER" -x OPTCAST_SERVERS="$SERVER_LIST" -x OPTCAST_MPI_STATS=1 -x OPTCAST_SECRET_FILE \
  "$BENCH" -b 64M -e 64M -n 3 -w 1 | tee "$WORK/optcast.txt"
awk '!/^#/ {t[FILENAME] = $3} END {
  printf "64 MiB MPI_Allreduce: Open MPI %.0f ms, with liboptcast-mpi.so %.0f ms: %.2fx faster\n",
         t[ARGV[1]] / 1000, t[ARGV[2]] / 1000, t[ARGV[1]] / t[ARGV[2]] }' "$WORK/mpi.txt" "$WORK/optcast.txt"
fi
[[ $PARTS == *ddp* ]] || exit 0

echo "== DDP on optcast and gloo, one rank per worker host"
mkdir -p "$WORK/ddp"
pids=()
for ((r = 0; r < W; r++)); do
  ip netns exec "optcast-emu-w$r" env PYTHONPATH="$BUILD/python" OPTCAST_SERVERS="$SERVER_LIST" \
    GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 python/examples/ddp_compare.py --rank "$r" --np "$W" \
    --store "$WORK/ddp" --steps "${STEPS:-10}" --width "${WIDTH:-1024}" --batch "${BATCH:-32}" >"$WORK/ddp$r.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
cat "$WORK/ddp0.log"
if ((status)); then
  for ((r = 1; r < W; r++)); do tail -5 "$WORK/ddp$r.log"; done
fi
exit $status
