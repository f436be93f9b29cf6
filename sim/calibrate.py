#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Simulates the emulated cluster's measured setups and compares with the measurements.

Usage: calibrate.py SIM_BINARY [--data CSV ...] [--sizes 16777216,67108864] [--tolerance 0.10]
       [--markdown] [optcast-sim flags that override the emulated setup]

Two kinds of data: one switch (emulated-cluster-200mbit.csv, figures as a share of the bound), and
racks behind rate-limited uplinks (emulated-cluster-racks-200mbit.csv, `optcast emu run --racks R
--uplink RATE`, figures in MB/s), where flat servers fill racks of their own and a tree's leaves sit
in their workers' racks with its roots spread over them, as in optcast-sim.
Exits 1 if any compared figure is off by more than the tolerance (relative to the measurement).
"""
import argparse
import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The emulated cluster (docs/emulated-cluster.md): 200 Mbit/s HTB links counting Ethernet frames,
# MTU 9000 so TCP payload is (9000-52)/(9000+14) of the rate; one bridge (one rack); every host on
# one 2-core machine.
EMULATED = [
    "--link-mbit", "200", "--payload-share", f"{(9000 - 52) / (9000 + 14):.6f}",
    "--latency-us", "60", "--rack-size", "64", "--oversub", "1",
]
# No fitted parameter: the model runs as the scale study runs it, with no server delay. A data file
# may still give one per row (column server_delay_us, microseconds) to compare a variant.


def bound(algo, w, s, rate):
    if algo == "server":
        return rate * min(1.0, s / w)
    return rate * w / (2.0 * (w - 1))


def racks_args(w, racks, uplink_mbit):
    """The emulated racks: workers / racks workers per rack switch, an uplink of uplink_mbit."""
    if racks <= 0:
        return []
    rack_size = w // racks
    return ["--rack-size", str(rack_size), "--oversub", f"{rack_size * 200 / uplink_mbit:g}"]


def simulate(sim, algo, w, s, nbytes, extra, racks=0, uplink_mbit=0, delay_us=0):
    args = [sim, "--workers", str(w), "--bytes", str(nbytes)] + EMULATED + ["--server-delay-us", str(delay_us)]
    args += racks_args(w, racks, uplink_mbit) + extra
    if algo == "server":
        args += ["--algo", "servers", "--servers", str(s)]
    elif algo == "tree":
        # As `optcast emu run --tree --racks R`: S = L(R + 1), L leaves per rack and L roots, spread.
        trees = s // (racks + 1)
        args += ["--algo", "tree", "--servers", str(trees), "--roots", str(trees), "--root-placement", "spread"]
    else:
        args += ["--algo", "ring"]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sim")
    ap.add_argument("--data", action="append",
                    help="measurements (repeatable; default: both files in sim/data)")
    ap.add_argument("--sizes", default="1048576,16777216,67108864", help="sizes that must agree (one switch)")
    ap.add_argument("--rack-sizes", default="4194304,16777216,67108864",
                    help="sizes that must agree with racks (1 MiB: see docs/scale.md, \"Calibration\")")
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--markdown", action="store_true")
    a, extra = ap.parse_known_args()  # anything else goes to optcast-sim, after the defaults
    a.extra = extra
    must = {int(x) for x in a.sizes.split(",") if x}
    must_racks = {int(x) for x in a.rack_sizes.split(",") if x}
    rate = 25e6
    data = a.data or [os.path.join(HERE, "data", f)
                      for f in ("emulated-cluster-200mbit.csv", "emulated-cluster-racks-200mbit.csv")]
    rows = []
    for path in data:
        rows += [r for r in csv.DictReader(l for l in open(path) if not l.startswith("#"))]
    worst = 0.0
    failed = 0
    if a.markdown:
        print("| algorithm | W | S | racks | size | measured MB/s | simulated MB/s | sim/measured |")
        print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        algo, w, s, nbytes = r["algo"], int(r["workers"]), int(r["servers"]), int(r["bytes"])
        racks, uplink = int(r.get("racks") or 0), float(r.get("uplink_mbit") or 0)
        if r.get("measured_MBps"):
            measured = float(r["measured_MBps"]) * 1e6
        else:
            measured = float(r["pct_of_bound"]) / 100 * bound(algo, w, s, rate)
        model = algo if algo in ("server", "tree") else "ring"
        delay = int(r.get("server_delay_us") or 0)
        sim = simulate(a.sim, model, w, s, nbytes, a.extra, racks, uplink, delay)["algbw_Bps"]
        ratio = sim / measured
        gap = r.get("open_gap") == "yes"  # explained in docs/scale.md, not a tolerance to meet
        checked = nbytes in (must_racks if racks else must) and not gap
        if checked:
            worst = max(worst, abs(ratio - 1))
            if abs(ratio - 1) > a.tolerance:
                failed += 1
        size = f"{nbytes >> 20} MiB"
        where = f"{racks} x {w // racks}, {uplink:g} Mbit/s up" if racks else "-"
        if a.markdown:
            print(f"| {algo} | {w} | {s or '-'} | {where} | {size} | {measured / 1e6:.2f} | {sim / 1e6:.2f} | "
                  f"{ratio:.3f}{' (open gap)' if gap else '' if checked else ' (not checked)'} |")
        else:
            flag = "open gap" if gap else "" if not checked else ("ok" if abs(ratio - 1) <= a.tolerance else "OFF")
            print(f"{algo:6s} W={w} S={s} racks={racks} {size:>7s} measured {measured / 1e6:6.2f} MB/s "
                  f"simulated {sim / 1e6:6.2f} MB/s  sim/meas {ratio:.3f} {flag}")
    print(f"worst |sim/measured - 1| over {sorted(must)} bytes (racks: {sorted(must_racks)}): {worst:.3f} "
          f"(tolerance {a.tolerance})",
          file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
