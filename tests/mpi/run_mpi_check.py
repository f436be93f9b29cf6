#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Runs optcast-mpi-check under mpirun without and with liboptcast-mpi.so (real reduction servers
on loopback) and checks that the results agree and that the interposer routed exactly the calls
that qualify. With --unreachable the servers do not exist: every rank must say so and every
collective must still be right (through MPI)."""

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from local_servers import servers, start_server, stop  # noqa: E402

TIMEOUT_S = 240


def mpirun(args, np, env_vars, outdir):
    if args.flavor == "openmpi":
        cmd = [args.mpiexec, "--allow-run-as-root", "--oversubscribe", "-np", str(np),
               "--mca", "btl_vader_single_copy_mechanism", "none"]
        for k, v in env_vars.items():
            cmd += ["-x", f"{k}={v}"]
    else:  # MPICH's hydra
        cmd = [args.mpiexec, "-n", str(np)]
        for k, v in env_vars.items():
            cmd += ["-genv", k, v]
    cmd += [args.check, "run", outdir]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited with {p.returncode}")
    return p.stdout, p.stderr


def counters(text, pattern):
    """{rank: [(kind, via_servers, via_mpi), ...]} from the lines matching pattern."""
    out = {}
    for m in re.finditer(pattern + r"(.*)$", text, re.M):
        out[int(m.group(1))] = re.findall(r"(MPI_\w+) (\d+) via servers (\d+) via MPI", m.group(2))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flavor", choices=["openmpi", "mpich"], default="openmpi")
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--check", required=True, help="the optcast-mpi-check program")
    ap.add_argument("--interposer", required=True, help="liboptcast-mpi.so")
    ap.add_argument("--optcast", required=True, help="the optcast command (servers)")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--unreachable", action="store_true")
    args = ap.parse_args()

    if args.unreachable:
        # A port nothing listens on (a server's, after it stopped).
        proc, addr = start_server(args.optcast)
        stop(proc)
        run_and_check(args, addr)
    else:
        with servers(args.optcast, args.servers) as addresses:
            run_and_check(args, addresses)


def run_and_check(args, addresses):
    with tempfile.TemporaryDirectory() as tmp:
        plain, with_optcast = os.path.join(tmp, "mpi"), os.path.join(tmp, "optcast")
        os.mkdir(plain)
        os.mkdir(with_optcast)
        out, _ = mpirun(args, args.np, {}, plain)
        env = {"LD_PRELOAD": args.interposer, "OPTCAST_SERVERS": addresses, "OPTCAST_MPI_MIN_BYTES": "0",
               "OPTCAST_MPI_STATS": "1", "OPTCAST_CONNECT_TIMEOUT_MS": "2000"}
        out2, err2 = mpirun(args, args.np, env, with_optcast)
        cmp = subprocess.run([args.check, "compare", plain, with_optcast], capture_output=True, text=True,
                             timeout=TIMEOUT_S)
        sys.stdout.write(cmp.stdout)
        if cmp.returncode != 0:
            sys.exit("results with liboptcast-mpi.so differ from MPI's")

    expected = counters(out2, r"optcast-mpi-check: rank (\d+) expects: ")
    seen = counters(err2, r"optcast-mpi: rank (\d+): ")
    if sorted(expected) != list(range(args.np)) or sorted(seen) != list(range(args.np)):
        sys.exit(f"missing counter lines: expected ranks {sorted(expected)}, interposer ranks {sorted(seen)}")
    for rank in range(args.np):
        want = expected[rank]
        if args.unreachable:
            want = [(k, "0", str(int(r) + int(p))) for k, r, p in want]
        if seen[rank] != want:
            sys.exit(f"rank {rank}: the interposer counted {seen[rank]}, the program expected {want}")
    if sum(int(r) for k, r, p in seen[0]) == 0 and not args.unreachable:
        sys.exit("nothing went through the servers")
    if args.unreachable and "could not join the reduction servers" not in err2:
        sys.exit("unreachable servers were not reported")
    print(f"OK: {args.np} ranks, results identical, counters match")

if __name__ == "__main__":
    main()
