#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Summary of scripts/emu-failover.sh's run: the iterations around the kill, when the job was back
at full speed, and the bandwidth before and after against the bound for S and S - 1 servers.

usage: emu_failover_summary.py RESULTS_DIR WORKERS SERVERS RATE
"""
import datetime
import re
import statistics
import sys

out, workers, servers, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
kill_at = float(open(f"{out}/kill-time.txt").read())
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate.lower())
rate_Bps = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8
rows = [line.split() for line in open(f"{out}/iterations.txt")]
its = [(int(r[2]), float(r[3]), float(r[4]) / 1e6, int(r[5])) for r in rows]  # i, end s, duration s, failovers
size = int(rows[0][1])


def bound(s):
    return rate_Bps * min(s, workers) / workers


before = [d for _, e, d, _ in its if e < kill_at]
hit = next(k for k, (_, e, _, _) in enumerate(its) if e >= kill_at)
after = [d for _, _, d, _ in its[hit + 1:]]
steady = statistics.median(after)
# Back at full speed: the end of the first iteration from the one the kill hit on that took at
# most 10% over the new median.
back = next(k for k in range(hit, len(its)) if its[k][2] <= 1.1 * steady)

# When rank 0 saw the server go and applied the failover (its log, millisecond wall clock).
def log_time(pattern):
    for line in open(f"{out}/rank-0.log"):
        if pattern in line:
            stamp = line[1:24]
            return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").replace(
                tzinfo=datetime.timezone.utc).timestamp()
    return None


lost, agreed = log_time("lost the connection"), log_time("failover 1:")
print(f"size {size} B, {workers} workers, {servers} -> {servers - 1} servers, {rate}; "
      f"server {servers - 1} killed after iteration {its[hit - 1][0]}")
if lost is not None and agreed is not None:
    print(f"rank 0 saw the server go {1e3 * (lost - kill_at):.0f} ms after the kill and applied the failover "
          f"{1e3 * (agreed - lost):.0f} ms later (log timestamps, 1 ms resolution)")
print("iteration  end-after-kill(s)  duration(ms)  failovers")
for i, e, d, f in its[max(0, hit - 3):hit + 6]:
    print(f"{i:9d}  {e - kill_at:17.3f}  {d * 1e3:12.1f}  {f:9d}")
bb, ba = size / statistics.median(before), size / steady
print(f"before: median {statistics.median(before) * 1e3:.1f} ms = {bb / 1e6:.2f} MB/s, "
      f"{100 * bb / bound(servers):.1f}% of the bound for {servers} servers ({bound(servers) / 1e6:.2f} MB/s)")
print(f"after:  median {steady * 1e3:.1f} ms = {ba / 1e6:.2f} MB/s, "
      f"{100 * ba / bound(servers - 1):.1f}% of the bound for {servers - 1} servers "
      f"({bound(servers - 1) / 1e6:.2f} MB/s)")
print(f"the iteration the kill hit took {its[hit][2] * 1e3:.1f} ms ({its[hit][2] / steady:.2f} x the new median); "
      f"back at full speed {its[back][1] - kill_at:.3f} s after the kill (end of iteration {its[back][0]})")
