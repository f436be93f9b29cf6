#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Runs optcast-mpi-check under mpirun without and with liboptcast-mpi.so (real reduction servers
on loopback) and checks that the results agree and that the interposer routed exactly the calls
that qualify. Every rank runs on this host, so the interposer is told to use the servers anyway
(OPTCAST_MPI_ONE_HOST=servers), except with --one-host-default, where everything must stay with
MPI and rank 0 must say why. With --unreachable the servers do not exist: every rank must say so
once (later communicators fall back without trying again) and every collective must still be
right (through MPI). With --wrong-build LIB the program is started with the other MPI's build of
the interposer preloaded, which must stop it at once with an error naming the right build."""

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
    ap.add_argument("--one-host-default", action="store_true")
    ap.add_argument("--wire", choices=["bf16"], help="OPTCAST_WIRE_DTYPE for the run with the interposer")
    ap.add_argument("--wrong-build", help="the other MPI's build of the interposer")
    args = ap.parse_args()

    if args.wrong_build:
        check_wrong_build(args)
    elif args.unreachable:
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
        if not args.one_host_default:
            env["OPTCAST_MPI_ONE_HOST"] = "servers"
        tolerance = []
        if args.wire:
            env["OPTCAST_WIRE_DTYPE"] = args.wire
            # float32 on a bfloat16 wire: within (2u + 4u^2 + n 2^-23) of the sum of the inputs'
            # magnitudes (docs/wire-dtype.md), u = 2^-8; the program's float32 inputs are at most
            # 29/7 + 0.01 in magnitude, so the sum of n of them at most n times that.
            u = 2.0 ** -8
            bound = (2 * u + 4 * u * u + args.np * 2.0 ** -23) * args.np * (29 / 7 + 0.011)
            tolerance = [repr(bound)]
            print(f"float32 on a bfloat16 wire: results may differ from MPI's by {bound:.4f}")
        out2, err2 = mpirun(args, args.np, env, with_optcast)
        cmp = subprocess.run([args.check, "compare", plain, with_optcast] + tolerance, capture_output=True, text=True,
                             timeout=TIMEOUT_S)
        sys.stdout.write(cmp.stdout)
        if cmp.returncode != 0:
            sys.exit("results with liboptcast-mpi.so differ from MPI's")
        if args.wire:
            # And the wire was used: at float32's own tolerance the results differ.
            strict = subprocess.run([args.check, "compare", plain, with_optcast], capture_output=True, text=True,
                                    timeout=TIMEOUT_S)
            if strict.returncode == 0:
                sys.exit("float32 results match MPI's to 1e-5: the bfloat16 wire was not used")
            print("OK: float32 results differ from MPI's beyond 1e-5 and within the wire's bound")

    expected = counters(out2, r"optcast-mpi-check: rank (\d+) expects: ")
    seen = counters(err2, r"optcast-mpi: rank (\d+): ")
    if sorted(expected) != list(range(args.np)) or sorted(seen) != list(range(args.np)):
        sys.exit(f"missing counter lines: expected ranks {sorted(expected)}, interposer ranks {sorted(seen)}")
    stays = args.unreachable or args.one_host_default
    for rank in range(args.np):
        want = expected[rank]
        if stays:
            want = [(k, "0", str(int(r) + int(p))) for k, r, p in want]
        if seen[rank] != want:
            sys.exit(f"rank {rank}: the interposer counted {seen[rank]}, the program expected {want}")
    if sum(int(r) for k, r, p in seen[0]) == 0 and not stays:
        sys.exit("nothing went through the servers")

    # Rank 0's line at MPI_Init: the servers and the threshold, or why everything stays with MPI.
    if args.one_host_default:
        want_init = (f"optcast-mpi: all {args.np} ranks run on one host, where MPI's shared memory beats the "
                     f"reduction servers: collectives stay with MPI (OPTCAST_MPI_ONE_HOST=servers sends those of "
                     f"0 bytes or more to {addresses})")
    else:
        want_init = (f"optcast-mpi: collectives of 0 bytes or more (OPTCAST_MPI_MIN_BYTES) go to the reduction "
                     f"servers {addresses} although every rank runs on one host (OPTCAST_MPI_ONE_HOST=servers)")
    if err2.count(want_init) != 1:
        sys.exit(f"expected rank 0's line at MPI_Init once: {want_init!r}")
    # Rank 0's line at MPI_Finalize: how many of its calls the servers did.
    routed = sum(int(r) for k, r, p in seen[0])
    calls = sum(int(r) + int(p) for k, r, p in seen[0])
    want_end = f"optcast-mpi: {routed} of rank 0's {calls} collectives that Optcast can take went to the reduction servers"
    if err2.count(want_end) != 1:
        sys.exit(f"expected rank 0's line at MPI_Finalize once: {want_end!r}")

    if args.unreachable:
        # Each rank tries once; later communicators stay with MPI at once, without a second warning.
        tried = err2.count("could not join the reduction servers")
        if tried != args.np:
            sys.exit(f"expected one 'could not join' per rank ({args.np}), saw {tried}")
        if err2.count("keeps its collectives in MPI because not every rank reached") != 1:
            sys.exit("expected rank 0's fallback warning exactly once")
    elif "could not join" in err2:
        sys.exit("a rank could not join the servers")
    print(f"OK: {args.np} ranks, results identical, counters match")


def check_wrong_build(args):
    """The program of one MPI with the other MPI's interposer preloaded: stopped at load time."""
    env = dict(os.environ, LD_PRELOAD=args.wrong_build, OPTCAST_SERVERS="127.0.0.1:1")
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([args.check, "run", tmp], env=env, capture_output=True, text=True, timeout=60)
    sys.stderr.write(p.stderr)
    right = os.path.join(os.path.dirname(args.wrong_build), os.path.basename(args.interposer))
    mpi = "Open MPI" if args.flavor == "openmpi" else "MPICH"
    want = f"but this program uses {mpi}; preload {right} instead"
    if p.returncode != 1:
        sys.exit(f"exit code {p.returncode}, expected 1")
    if want not in p.stderr:
        sys.exit(f"expected {want!r} on stderr")
    print(f"OK: the wrong build stops a {mpi} program and names {right}")

if __name__ == "__main__":
    main()
