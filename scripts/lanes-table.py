#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""The data plane against lanes: one server of 1, 2, 4, 8 event loops on loopback.

For each lane count it runs `optcast bench` (servers on threads of the bench process, ranks in
processes of their own) and prints the algorithm bandwidth, the server's GB of input per server
CPU-second (srv_agg), the ranks' ns per byte (cli_cpu), and how the server's CPU splits over its
lane threads (from /proc/<server>/task, sampled while the bench runs: lane 0 on the server
process's main thread, the others named optcast-laneN, reduction threads optcast-reduce). Every result is checked by the bench itself (#wrong).

  scripts/lanes-table.py                      # build/tools/optcast, lanes 1 2 4 8, 8 ranks
  scripts/lanes-table.py --lanes 1 2 --ranks 4 --size 64M --reduce-threads 0

On a 2-core machine the lanes share two cores with the ranks, so the throughput cannot grow
with lanes there; the CPU split still shows whether every loop takes its share. Run it on a
many-core machine for the scaling table.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """{tid: (name, cpu seconds)} of every thread of `pid` now."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        # The name is in parentheses and may hold spaces; the fields after it are fixed.
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


def server_pid(bench_pid):
    """The bench's first child: it forks its servers before any rank."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == bench_pid:
            children.append((int(fields[19]), int(entry)))  # start time, pid
    return min(children)[1] if children else None


def run_one(args, lanes):
    cmd = [args.optcast, "bench", "--nranks", str(args.ranks), "--nservers", "1", "--io-threads", str(lanes),
           "-b", args.size, "-e", args.size, "--algo", "server", "-n", str(args.iters), "-w", str(args.warmup)]
    if args.reduce_threads is not None:
        cmd += ["--reduce-threads", str(args.reduce_threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last = {}
    server = None
    while proc.poll() is None:
        server = server or server_pid(proc.pid)
        now = thread_cpu(server) if server else {}
        for tid, (name, cpu) in now.items():
            # Lane 0 runs on the server's main thread, the others on threads named for their lane.
            last[tid] = ("optcast-lane0" if int(tid) == server else name, cpu)  # its last reading
        time.sleep(0.05)
    output = proc.stdout.read()
    if proc.returncode != 0:
        sys.exit(f"optcast bench with {lanes} lane(s) failed ({proc.returncode}):\n{output}")
    row = None
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 11 and not line.startswith("#") and re.fullmatch(r"\d+", parts[0]):
            row = parts
    if row is None:
        sys.exit(f"no result row in the bench output:\n{output}")
    per_name = collections.defaultdict(float)
    for name, cpu in last.values():
        per_name[name] += cpu
    lane_cpu = [per_name.get(f"optcast-lane{i}", 0.0) for i in range(lanes)]
    return {
        "algbw": float(row[5]), "wrong": int(row[7]), "srv_agg": float(row[8]), "cli_cpu": float(row[9]),
        "lane_cpu": lane_cpu, "reduce_cpu": per_name.get("optcast-reduce", 0.0),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--optcast", default="build/tools/optcast")
    p.add_argument("--lanes", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--size", default="256M")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reduce-threads", type=int, default=None,
                   help="the server's reduction threads (default: the server's own)")
    args = p.parse_args()

    print(f"# one server on loopback, {args.ranks} ranks, {args.size} AllReduce, {os.cpu_count()} cores here")
    print(f"# {'lanes':>5} {'algbw GB/s':>10} {'vs 1 lane':>9} {'srv_agg':>8} {'cli_ns/B':>8} {'#wrong':>6}  "
          "server CPU by thread (s): lanes | reduce")
    base = None
    ok = True
    for lanes in args.lanes:
        r = run_one(args, lanes)
        base = base or r["algbw"]
        total = sum(r["lane_cpu"]) + r["reduce_cpu"]
        shares = " ".join(f"{c:.2f}" for c in r["lane_cpu"])
        least = min(r["lane_cpu"]) / total if total > 0 else 0.0
        print(f"  {lanes:>5} {r['algbw']:>10.3f} {r['algbw'] / base:>9.2f} {r['srv_agg']:>8.3f} {r['cli_cpu']:>8.3f} "
              f"{r['wrong']:>6}  {shares} | {r['reduce_cpu']:.2f}  (least lane {least:.0%} of the server's CPU)")
        ok = ok and r["wrong"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
