#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Runs the scale study (docs/scale.md): ring, flat servers and trees at n = 64, 256, 1024.

Usage: study.py SIM_BINARY OUT_DIR [--quick] [--full] [--jobs 2] [--max-workers N] [--timeout S]
       study.py SIM_BINARY OUT_DIR --check-fold RESULTS_JSON
Writes OUT_DIR/results.json (one object per run), OUT_DIR/tables.md and PNG plots (gnuplot).
--check-fold runs folded every cell that RESULTS_JSON has a whole run of, and writes
OUT_DIR/fold-check.md: how far the fold (docs/scale.md, "The fold") moves each figure.
--quick runs the same study at n = 8, 16 and 32 with 1 and 4 MiB in seconds. A run that takes
longer than --timeout seconds of wall time is left out of the tables and listed as such; --full
runs every cell whole, where the default folds some and leaves out others (how_to_run()).
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

MIB = 1 << 20
# The fabric of the study: 100 Gbit/s host links, 5 us host to host inside a rack, racks of 32
# workers, servers that reduce 40 GB/s of input (a few cores of Highway kernels).
FABRIC = ["--link-mbit", "100000", "--latency-us", "5", "--rack-size", "32", "--reduce-gbs", "40"]
RACK = 32
LABELS = ["ring", "servers M=n", "servers M=n/4", "tree M=n", "tree M=n/4"]


# Runs that cost far more than the rest (docs/scale.md, "Cost"). Flat servers with M = n/4 from
# 256 workers share each server port among hundreds of flows, and trees with a leaf per worker at
# 256 or more workers and 64 MiB couple about a thousand flows per rack, in one max-min system
# that SimGrid re-solves at every completion (10 minutes to hours); these run folded, FOLD_RACKS
# of their racks simulated (docs/scale.md, "The fold"), in seconds. Flat servers at 1024 workers
# and 64 MiB play 4.2 million messages (several minutes of CPU each) and folding them saves
# nothing (1024 servers' results become as many slow flows): left out. --full runs all whole.
FOLD_RACKS = 1


def how_to_run(label, n, size):
    """'whole', 'fold' or 'skip' for one cell of the study."""
    if size < 64 * MIB or label == "ring":
        return "whole"
    if label.startswith("tree"):
        return "fold" if n >= 1024 or (n >= 256 and label.startswith("tree M=n") and "/4" not in label) else "whole"
    if label == "servers M=n/4" and n >= 256:
        return "fold"
    return "skip" if n >= 1024 else "whole"


def folded(r):
    """Whether a result came from a folded run (older results carry no simulated_racks: whole)."""
    return r.get("simulated_racks", 0) not in (0, -(-r["workers"] // r.get("rack_size", RACK)))


def with_fold(cfg):
    """The same cell, folded to FOLD_RACKS worker racks."""
    return (*cfg[:4], cfg[4] + ["--simulated-racks", str(FOLD_RACKS)])


def best(results, n, label):
    """The run that stands for one cell: a whole one if there is one, else a folded one."""
    m = sorted((r for r in results if r["workers"] == n and r["label"] == label), key=folded)
    return m[0] if m else None


def configs(ns, sizes, oversubs):
    """(label, n, size, oversub, flags) for every run of the study."""
    out = []
    for n in ns:
        racks = max(1, n // RACK)
        leaves_full = min(RACK, n)
        for size in sizes:
            for o in oversubs:
                out.append(("ring", n, size, o, ["--algo", "ring"]))
                out.append(("servers M=n", n, size, o, ["--algo", "servers", "-m", str(n)]))
                out.append(("servers M=n/4", n, size, o, ["--algo", "servers", "-m", str(n // 4)]))
                # One leaf server per worker in each rack, one root per rack.
                out.append(("tree M=n", n, size, o,
                            ["--algo", "tree", "-m", str(leaves_full), "--roots", str(racks)]))
                out.append(("tree M=n/4", n, size, o,
                            ["--algo", "tree", "-m", str(max(1, leaves_full // 4)), "--roots", str(racks)]))
    return out


PLACEMENTS = ("spread", "rack", "spine")


def placement_configs(n, sizes, oversubs):
    """The tree with a leaf per worker at n workers, its roots in each place (docs/scale.md, "Root
    placement"): spread over the worker racks (the default), all in one rack, on the spine."""
    racks = max(1, n // RACK)
    return [(f"tree M=n roots {p}", n, size, o,
             ["--algo", "tree", "-m", str(min(RACK, n)), "--roots", str(racks), "--root-placement", p])
            for p in PLACEMENTS for size in sizes for o in oversubs]


def sweep(n, size):
    """Flat servers at n workers, M from n/4 to 5n/4: how many servers reach 90% of the link."""
    return [("servers sweep", n, size, 1, ["--algo", "servers", "-m", str(m)])
            for m in sorted({max(1, n * k // 8) for k in (2, 4, 6, 7, 8, 9, 10)})]


def run_one(sim, cfg, timeout):
    label, n, size, o, flags = cfg
    t0 = time.time()
    args = [sim, *FABRIC, "--workers", str(n), "--bytes", str(size), "--oversub", str(o), *flags]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(label=label, workers=n, bytes=size, oversub=o, timed_out=True, wall_s=timeout,
                    args=" ".join(args[1:]))
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {p.stderr.strip()}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r.update(label=label, wall_s=round(time.time() - t0, 2))
    return r


def plot(results, out_dir, size, oversub):
    rows = [r for r in results if r["bytes"] == size and r["oversub"] == oversub and r["label"] in LABELS]
    if not rows:
        return
    labels = LABELS
    ns = sorted({r["workers"] for r in rows})
    dat = os.path.join(out_dir, f"algbw-{size >> 20}MiB-oversub{oversub:g}.dat")
    any_folded = False
    with open(dat, "w") as f:
        f.write("# n " + " ".join(l.replace(" ", "_") for l in labels) + "  (algbw / link rate)\n")
        for n in ns:
            vals = []
            for l in labels:
                m = best(rows, n, l)
                vals.append(f"{m['algbw_over_link']:.4f}" if m else "NaN")
                any_folded = any_folded or bool(m and folded(m))
            f.write(f"{n} " + " ".join(vals) + "\n")
    png = dat[:-4] + ".png"
    cols = " , ".join(f"'{dat}' using 1:{i + 2} with linespoints lw 2 title '{l}'" for i, l in enumerate(labels))
    script = (f"set terminal pngcairo size 800,500\nset output '{png}'\nset logscale x 2\n"
              f"set xlabel 'workers n'\nset ylabel 'algbw / link rate'\nset yrange [0:1.1]\nset key outside\n"
              f"set title 'AllReduce of {size >> 20} MiB, fat tree {oversub:g}:1, 100 Gbit/s links"
              f"{' (some points folded: see tables)' if any_folded else ''}'\n"
              f"plot {cols}\n")
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no plot {png}: {e} (apt-get install gnuplot-nox)", file=sys.stderr)


def tables(results):
    lines = []
    for o in sorted({r["oversub"] for r in results}):
        for size in sorted({r["bytes"] for r in results}):
            rows = [r for r in results if r["bytes"] == size and r["oversub"] == o and r["label"] in LABELS]
            if not rows:
                continue
            labels = LABELS
            lines.append(f"\nalgbw / link rate, {size >> 20} MiB, fat tree {o:g}:1\n")
            lines.append("| n | " + " | ".join(labels) + " |")
            lines.append("|---|" + "---|" * len(labels))
            for n in sorted({r["workers"] for r in rows}):
                cells = []
                for l in labels:
                    m = best(rows, n, l)
                    cells.append("-" if not m else f"{m['algbw_over_link']:.3f}" + ("*" if folded(m) else ""))
                lines.append(f"| {n} | " + " | ".join(cells) + " |")
    if any(folded(r) for r in results):
        lines.append("\n\\* folded: only some of the worker racks simulated (docs/scale.md, \"The fold\")")
    pl = [r for r in results if r["label"].startswith("tree M=n roots ")]
    if pl:
        n = pl[0]["workers"]
        cols = sorted({(r["bytes"], r["oversub"]) for r in pl})
        lines.append(f"\ntree M=n, n = {n}: where the roots sit (algbw / link rate)\n")
        lines.append("| roots | " + " | ".join(f"{b >> 20} MiB {o:g}:1" for b, o in cols) + " |")
        lines.append("|---|" + "---|" * len(cols))
        for p in PLACEMENTS:
            cells = []
            for b, o in cols:
                m = [r for r in pl if r["label"].endswith(" " + p) and r["bytes"] == b and r["oversub"] == o]
                cells.append(f"{m[0]['algbw_over_link']:.3f}" + ("*" if folded(m[0]) else "") if m else "-")
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
    sw = [r for r in results if r["label"] == "servers sweep"]
    if sw:
        lines.append(f"\nflat servers, n = {sw[0]['workers']}, {sw[0]['bytes'] >> 20} MiB, non-blocking\n")
        lines.append("| M | algbw / link rate |")
        lines.append("|---|---|")
        for r in sorted(sw, key=lambda r: r["servers"]):
            lines.append(f"| {r['servers']} | {r['algbw_over_link']:.3f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sim")
    ap.add_argument("out_dir")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-workers", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--full", action="store_true",
                    help="run every cell whole: neither fold nor leave out what how_to_run() would")
    ap.add_argument("--render", action="store_true", help="only redo tables and plots from OUT_DIR/results.json")
    ap.add_argument("--check-fold", metavar="RESULTS_JSON",
                    help="run folded every cell with a whole run in RESULTS_JSON; writes OUT_DIR/fold-check.md")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    if a.check_fold:
        return check_fold(a.sim, a.check_fold, a.out_dir, a.jobs, a.timeout)
    if a.render:
        with open(os.path.join(a.out_dir, "results.json")) as f:
            results = [r for r in json.load(f) if not r.get("timed_out")]
        render(results, a.out_dir, "")
        return 0
    ns = [8, 16, 32] if a.quick else [n for n in (64, 256, 1024) if n <= a.max_workers]
    cfgs = configs(ns, [1 * MIB, 4 * MIB] if a.quick else [1 * MIB, 64 * MIB], [1, 4])
    cfgs += sweep(16, 4 * MIB) if a.quick else sweep(64, 8 * MIB)
    if not a.quick and 1024 in ns:
        cfgs += placement_configs(1024, [1 * MIB, 64 * MIB], [1, 4])
    plans = {c[:4]: "whole" if a.full else how_to_run(c[0], c[1], c[2]) for c in cfgs}
    skipped = [c for c in cfgs if plans[c[:4]] == "skip"]
    cfgs = [with_fold(c) if plans[c[:4]] == "fold" else c for c in cfgs if plans[c[:4]] != "skip"]
    # Cheapest first: what finishes is in the tables even if the expensive runs time out.
    cfgs.sort(key=lambda c: (c[1], c[2], c[3]))
    results, timed_out = [], []
    path = os.path.join(a.out_dir, "results.json")
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futs = {pool.submit(run_one, a.sim, c, a.timeout): c for c in cfgs}
        for i, f in enumerate(concurrent.futures.as_completed(futs), 1):
            r = f.result()
            if r.get("timed_out"):
                timed_out.append(r)
                print(f"[{i}/{len(cfgs)}] {r['label']:14s} n={r['workers']:5d} {r['bytes'] >> 20:3d} MiB "
                      f"{r['oversub']:g}:1  over {a.timeout:g} s of wall time, left out", flush=True)
                continue
            results.append(r)
            print(f"[{i}/{len(cfgs)}] {r['label']:14s} n={r['workers']:5d} {r['bytes'] >> 20:3d} MiB "
                  f"{r['oversub']:g}:1  algbw/link {r['algbw_over_link']:.3f}{' (folded)' if folded(r) else ''}  "
                  f"({r['messages']} messages, {r['cpu_s']:.1f} s CPU, {r['wall_s']} s wall)", flush=True)
            with open(path, "w") as out:
                json.dump(results + timed_out, out, indent=1)
    notes = ""
    if skipped:
        notes += "\nnot simulated (cost): " + "; ".join(f"{c[0]} n={c[1]} {c[2] >> 20} MiB {c[3]:g}:1" for c in skipped) + "\n"
    if timed_out:
        notes += "\nleft out (over the wall-time limit): " + "; ".join(
            f"{r['label']} n={r['workers']} {r['bytes'] >> 20} MiB {r['oversub']:g}:1" for r in timed_out) + "\n"
    render(results, a.out_dir, notes)
    return 0


def check_fold(sim, results_path, out_dir, jobs, timeout):
    """Runs folded every cell that has a whole run in results_path and tables folded vs whole."""
    with open(results_path) as f:
        whole = [r for r in json.load(f) if not r.get("timed_out") and not folded(r)]
    grid = {c[:4]: c for c in configs([64, 256, 1024], [1 * MIB, 64 * MIB], [1, 4])}
    todo = []
    for r in whole:
        key = (r["label"], r["workers"], r["bytes"], r["oversub"])
        if key not in grid or r["label"] == "ring" or r["workers"] < 2 * RACK:
            continue
        if how_to_run(*key[:3]) == "skip":
            continue  # folding saves nothing there
        todo.append((r, with_fold(grid[key])))
    todo.sort(key=lambda t: (t[0]["bytes"], t[0]["oversub"], t[0]["label"], t[0]["workers"]))
    def cpu(r):
        return f"{r['cpu_s']:.1f} s" if "cpu_s" in r else "?"

    lines = ["| configuration | n | size | fabric | whole | folded | folded / whole | CPU whole | CPU folded |",
             "|---|---|---|---|---|---|---|---|---|"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for (w, _), f in zip(todo, pool.map(lambda t: run_one(sim, t[1], timeout), todo)):
            cells = (f"| {w['label']} | {w['workers']} | {w['bytes'] >> 20} MiB | {w['oversub']:g}:1 | "
                     f"{w['algbw_over_link']:.3f} | ")
            if f.get("timed_out"):
                lines.append(cells + f"over {timeout:g} s | | {cpu(w)} | |")
            else:
                lines.append(cells + f"{f['algbw_over_link']:.3f} | {f['algbw_over_link'] / w['algbw_over_link']:.3f} | "
                             f"{cpu(w)} | {cpu(f)} |")
            print(lines[-1], flush=True)
    with open(os.path.join(out_dir, "fold-check.md"), "w") as out:
        out.write(f"Folded ({FOLD_RACKS} worker rack{'s' if FOLD_RACKS > 1 else ''} simulated) against whole runs\n\n")
        out.write("\n".join(lines) + "\n")
    return 0


def render(results, out_dir, notes):
    for size in sorted({r["bytes"] for r in results}):
        for o in sorted({r["oversub"] for r in results}):
            plot(results, out_dir, size, o)
    md = tables(results) + notes
    with open(os.path.join(out_dir, "tables.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    sys.exit(main())
