#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Reads the timeline traces of one server-path run (servers' --trace files and the ranks'
OPTCAST_TRACE files, all in one folder) and prints, for the last collectives, when each server
got the first and the last rank's part of every chunk, and when each rank got its first and last
result: the pipeline of a collective, chunk by chunk (docs/benchmarks.md, "Mid-size collectives").

    tools/trace/chunk_rounds.py DIR [N]     # N: how many of the last collectives (default 2)

Server traces are DIR/server*.json, rank traces DIR/rank*.json. Times are milliseconds from the
first rank's issue of the collective; all processes of a host share the trace clock.
"""
import collections
import glob
import json
import re
import sys


def load(path):
    text = open(path).read().rstrip()
    try:
        return json.loads(text)["traceEvents"]
    except json.JSONDecodeError:  # a process still running: close the array ourselves
        return json.loads(text.rstrip(",").rstrip("]}").rstrip().rstrip(",") + "]}")["traceEvents"]


def track_names(events):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name"}


def index(path, pattern):
    return int(re.search(pattern, path).group(1))


def main():
    folder = sys.argv[1]
    last = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    arrivals = collections.defaultdict(lambda: collections.defaultdict(list))  # seq -> (server, offset) -> [(ts, end, rank)]
    for path in glob.glob(folder + "/server*.json"):
        server = index(path, r"server(\d+)\.json")
        events = load(path)
        tracks = track_names(events)
        for e in events:
            if e.get("ph") == "X" and e["name"] == "recv":
                rank = re.search(r"rank (\d+)", tracks.get((e["pid"], e["tid"]), ""))
                arrivals[e["args"]["seq"]][(server, e["args"]["offset"])].append(
                    (e["ts"], e["ts"] + e["dur"], int(rank.group(1)) if rank else -1))
    spans = collections.defaultdict(dict)  # seq -> rank -> [issue, done]
    results = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in glob.glob(folder + "/rank*.json"):
        rank = index(path, r"rank(\d+)\.json")
        for e in load(path):
            if e.get("cat") == "request" and e.get("ph") in ("b", "e"):
                seq = int(str(e["id"]), 0) & ((1 << 40) - 1)
                spans[seq].setdefault(rank, [None, None])[0 if e["ph"] == "b" else 1] = e["ts"]
            elif e.get("ph") == "X" and e["name"] == "result":
                results[e["args"]["seq"]][rank].append(e["ts"] + e["dur"])
    complete = sorted(s for s in spans if all(b is not None and d is not None for b, d in spans[s].values()))
    if not complete:
        sys.exit(f"no complete collective in the rank traces of {folder}")
    for seq in complete[-last:]:
        t0 = min(b for b, _ in spans[seq].values())
        t1 = max(d for _, d in spans[seq].values())
        print(f"collective #{seq}: {(t1 - t0) / 1000:.2f} ms; ranks issued it over "
              f"{(max(b for b, _ in spans[seq].values()) - t0) / 1000:.2f} ms")
        # A server's sequence numbers repeat across jobs: keep the arrivals inside this collective.
        chunks = {k: [a for a in v if t0 - 2000 <= a[0] <= t1] for k, v in arrivals[seq].items()}
        for (server, offset), got in sorted((k, v) for k, v in chunks.items() if v):
            last_in = max(got, key=lambda a: a[1])
            print(f"  server {server} chunk at {offset:>10}: first part {(min(a[0] for a in got) - t0) / 1000:8.2f}, "
                  f"all {len(got)} in {(last_in[1] - t0) / 1000:8.2f} (last from rank {last_in[2]})")
        for rank in sorted(results[seq]):
            ends = [t for t in results[seq][rank] if t0 <= t <= t1]
            if ends:
                print(f"  rank {rank}: first result {(min(ends) - t0) / 1000:8.2f}, last {(max(ends) - t0) / 1000:8.2f}")


if __name__ == "__main__":
    main()
