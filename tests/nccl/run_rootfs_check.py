#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""The NCCL plugin in a root filesystem that holds only the C/C++ runtime.

Builds a directory with libc, libm, libdl, libpthread, librt, ld-linux, libgcc_s and libstdc++
(copied from this machine, at the paths the dynamic loader searches), the plugin, and the
rootfs_allreduce program; starts real reduction servers outside it on loopback, with a secret;
and runs, with chroot, an empty environment (no LD_LIBRARY_PATH, no loader cache):

1. a CollNet AllReduce through the plugin on every rank, checked against a reference;
2. the same with OPTCAST_TRANSPORT=ofi, which must fail saying that it needs libfabric.

Needs root, or unprivileged user namespaces (`unshare -r`); otherwise it reports a skip (77).
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from local_servers import start_server, stop  # noqa: E402
import rootfs  # noqa: E402


def build_rootfs(root, program, plugin, secret):
    rootfs.add_runtime(root, program)
    rootfs.copy_in(root, program, "/bin/rootfs_allreduce")
    rootfs.copy_in(root, plugin, "/plugins/libnccl-net-optcast.so")
    os.chmod(rootfs.copy_in(root, secret, "/etc/optcast/secret"), 0o600)
    return rootfs.listing(root)


def run_in_rootfs(prefix, root, env, args, timeout=150):
    cmd = prefix + [root, "/bin/rootfs_allreduce", "--plugin", "/plugins/libnccl-net-optcast.so"] + args
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    sys.stdout.write(r.stdout)
    sys.stdout.write(r.stderr)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", required=True, help="the rootfs_allreduce program")
    ap.add_argument("--plugin", required=True, help="libnccl-net-optcast.so")
    ap.add_argument("--optcast", required=True, help="the optcast command (servers)")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--servers", type=int, default=2)
    a = ap.parse_args()

    prefix = rootfs.chroot_prefix()
    if prefix is None:
        print("skipped: chroot needs root or unprivileged user namespaces (unshare -r)")
        return rootfs.SKIP

    with tempfile.TemporaryDirectory(prefix="optcast-rootfs-") as tmp:
        secret = os.path.join(tmp, "secret")
        with open(os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(os.urandom(32).hex().encode())
        root = os.path.join(tmp, "root")
        files = build_rootfs(root, a.check, a.plugin, secret)
        print("root filesystem:", " ".join(files))

        procs = []
        try:
            for _ in range(a.servers):
                procs.append(start_server(a.optcast, ["--secret-file", secret]))
            env = {
                "OPTCAST_SERVERS": ",".join(addr for _, addr in procs),
                "OPTCAST_SECRET_FILE": "/etc/optcast/secret",
                "OPTCAST_TIMEOUT_MS": "30000",
                "NCCL_DEBUG": "INFO",
            }
            r = run_in_rootfs(prefix, root, env, ["--ranks", str(a.ranks)])
            if r.returncode != 0:
                print(f"FAIL: the CollNet AllReduce through the plugin in the root filesystem (exit {r.returncode})")
                return 1
            if "CollNet active" not in r.stderr:
                print("FAIL: the plugin did not log 'CollNet active'")
                return 1

            env["OPTCAST_TRANSPORT"] = "ofi"
            r = run_in_rootfs(prefix, root, env, ["--ranks", "2", "--expect-error", "needs libfabric"])
            if r.returncode != 0:
                print(f"FAIL: OPTCAST_TRANSPORT=ofi without libfabric did not fail clearly (exit {r.returncode})")
                return 1
        finally:
            for proc, _ in procs:
                stop(proc)
    print("PASS: the plugin loads and runs CollNet AllReduce with only the C/C++ runtime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
