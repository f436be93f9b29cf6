#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
# Multi-host `optcast bench` under Open MPI's mpirun (or MPICH's mpiexec): one rank per host;
# the rank and size come from OMPI_COMM_WORLD_RANK/SIZE (or PMI_RANK/SIZE). The servers must
# already run (systemd unit, Kubernetes, or `optcast server` by hand).
#   RANK_HOSTS=w1,w2,w3,w4 SERVERS=s1:8918,s2:8918 OPTCAST_SECRET_FILE=/etc/optcast/secret \
#     deploy/slurm/optcast-bench-mpirun.sh
set -euo pipefail
: "${RANK_HOSTS:?set RANK_HOSTS=host1,host2,... (one rank each; the first is rank 0)}"
: "${SERVERS:?set SERVERS=host:port,... (running reduction servers)}"
: "${OPTCAST_SECRET_FILE:?set OPTCAST_SECRET_FILE to the secret file of the servers (the same path on every host)}"
OPTCAST=${OPTCAST:-optcast}
IFS=, read -r -a hosts <<<"$RANK_HOSTS"
# Add `-x OPTCAST_TRACE=/tmp/optcast-rank%r.json` to get each rank's timeline trace.
mpirun -np "${#hosts[@]}" -H "$RANK_HOSTS" --map-by node -x OPTCAST_SECRET_FILE \
  "$OPTCAST" bench --rendezvous "${hosts[0]}:29500" --servers "$SERVERS" \
  -b 1M -e 1G -f 2 -n 20 -w 5 --algo server,ring --json optcast-bench.json --plot optcast-bench.png "$@"
