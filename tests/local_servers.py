# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Real reduction servers on loopback for the test drivers written in Python."""

import contextlib
import re
import select
import socket
import subprocess


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(optcast, extra_args=()):
    """Starts `optcast server` on a free loopback port; returns (process, "127.0.0.1:port")."""
    # The server takes no port 0: pick a free one (the kernel does not hand it out again at once).
    cmd = [optcast, "server", "--log-level", "warn", "--listen", f"127.0.0.1:{free_port()}", *extra_args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    line = proc.stdout.readline() if ready else ""
    m = re.search(r"listening on (\S+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"the server did not report its address within 20 s (got {line!r})")
    return proc, m.group(1)


def stop(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def servers(optcast, count):
    """Yields the comma-separated addresses of `count` running servers; stops them afterwards."""
    procs = []
    try:
        for _ in range(count):
            procs.append(start_server(optcast))
        yield ",".join(addr for _, addr in procs)
    finally:
        for proc, _ in procs:
            stop(proc)
