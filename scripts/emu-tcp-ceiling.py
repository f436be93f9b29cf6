#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""What plain TCP carries on the emulated cluster in the server path's pattern.

Every worker keeps one TCP connection to every server busy in both directions (bulk sends of
1 MiB, no protocol, no reduction) for a few seconds, and each worker reports what it received.
That is the most any reduction protocol over TCP can get from the emulated links on this machine:
when the machine's cores, not the links, are the limit (many small frames at MTU 1500), the
server path's "% of bound" should be read against this figure (docs/benchmarks.md).

Needs root, like `optcast emu`. Usage:
  sudo scripts/emu-tcp-ceiling.py [--workers 8] [--servers 8] [--rate 500mbit] [--mtu 1500]
                                  [--seconds 5] [--tcp-congestion cubic|system|NAME]
                                  [--optcast build/tools/optcast] [-- EMU-UP-FLAGS...]
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import threading
import time

PORT = 9300
CHUNK = b"\0" * (1 << 20)
# The congestion control of every connection: the server path's default (transport/posix/congestion.h).
CONGESTION = os.environ.get("CEILING_TCP_CONGESTION", "cubic")


def tune(sock):
    if CONGESTION != "system":
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, CONGESTION.encode())
    return sock


def pump_out(sock, seconds):
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            sock.sendall(CHUNK)
    except OSError:
        pass


def pump_in(sock, seconds, counts):
    end = time.monotonic() + seconds
    buf = bytearray(1 << 20)
    got = 0
    try:
        while True:
            n = sock.recv_into(buf)
            if n == 0:
                break
            if time.monotonic() < end:
                got += n
    except OSError:
        pass
    counts.append(got)


def serve(addr, peers, seconds):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addr, PORT))
    listener.listen(peers)
    threads = []
    for _ in range(peers):
        conn, _ = listener.accept()
        tune(conn)
        threads.append(threading.Thread(target=pump_out, args=(conn, seconds)))
        threads.append(threading.Thread(target=pump_in, args=(conn, seconds + 5, [])))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def work(servers, seconds):
    socks = []
    for host in servers:
        for _ in range(200):
            try:
                sock = tune(socket.socket())
                sock.connect((host, PORT))
                socks.append(sock)
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit(f"cannot connect to {host}:{PORT}")
    counts = []
    outs = [threading.Thread(target=pump_out, args=(s, seconds)) for s in socks]
    ins = [threading.Thread(target=pump_in, args=(s, seconds, counts)) for s in socks]
    for t in outs + ins:
        t.start()
    for t in outs:
        t.join()
    for s in socks:
        s.shutdown(socket.SHUT_WR)
    for t in ins:
        t.join()
    print(f"{sum(counts) / seconds / 1e6:.2f}")


def rate_bytes(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(k|m|g)?bit", text.lower())
    if not m:
        sys.exit(f"--rate '{text}' is not like 500mbit or 1gbit")
    return float(m.group(1)) * {None: 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("--serve", "--work"):
        seconds = float(sys.argv[2])
        if sys.argv[1] == "--serve":
            serve(sys.argv[3], int(sys.argv[4]), seconds)
        else:
            work(sys.argv[3].split(","), seconds)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--servers", type=int, default=8)
    ap.add_argument("--rate", default="500mbit")
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--tcp-congestion", default="cubic", help="congestion control of the connections, or 'system'")
    ap.add_argument("--optcast", default=os.path.join(os.path.dirname(__file__), "..", "build", "tools", "optcast"))
    ap.add_argument("emu_flags", nargs="*", help="more flags for `optcast emu up` (after --)")
    a = ap.parse_args()
    os.environ["CEILING_TCP_CONGESTION"] = a.tcp_congestion
    subprocess.run([a.optcast, "emu", "up", "--workers", str(a.workers), "--servers", str(a.servers), "--rate", a.rate,
                    "--mtu", str(a.mtu)] + a.emu_flags, check=True, stdout=subprocess.DEVNULL)
    try:
        status = subprocess.run([a.optcast, "emu", "status"], check=True, capture_output=True, text=True).stdout
        hosts = re.findall(r"(optcast-emu-([ws])\d+)\s+(\d+\.\d+\.\d+\.\d+)", status)
        workers = [(ns, ip) for ns, kind, ip in hosts if kind == "w"]
        servers = [(ns, ip) for ns, kind, ip in hosts if kind == "s"]
        if len(workers) != a.workers or len(servers) != a.servers:
            sys.exit(f"could not read the hosts from `optcast emu status`:\n{status}")
        me = os.path.abspath(__file__)
        procs = [subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, me, "--serve", str(a.seconds), ip,
                                   str(a.workers)]) for ns, ip in servers]
        time.sleep(0.5)
        targets = ",".join(ip for _, ip in servers)
        ranks = [subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, me, "--work", str(a.seconds), targets],
                                  stdout=subprocess.PIPE, text=True) for ns, _ in workers]
        got = [float(p.communicate()[0].strip() or 0) for p in ranks]
        for p in procs:
            p.wait(timeout=30)
    finally:
        subprocess.run([a.optcast, "emu", "down"], stdout=subprocess.DEVNULL)
    bound = rate_bytes(a.rate)
    mean = sum(got) / len(got)
    print(f"# plain TCP, every worker to every server and back, {a.workers} x {a.servers}, {a.rate}, MTU {a.mtu}, "
          f"{a.tcp_congestion}, {a.seconds:g} s")
    print("# received per worker (MB/s): " + " ".join(f"{g:.1f}" for g in got))
    print(f"mean {mean:.2f} MB/s = {100 * mean * 1e6 / bound:.1f}% of the link rate ({bound / 1e6:.2f} MB/s); "
          f"slowest worker {min(got):.2f} MB/s")


if __name__ == "__main__":
    main()
