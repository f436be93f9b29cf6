#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""An MPI interposer in a root filesystem of the C/C++ runtime and its MPI library alone.

Builds a root with the C/C++ runtime, the MPI library the interposer was built for with
everything that library needs, and the interposer; then, with chroot and an empty environment,
loads the interposer as a preload would (every symbol bound at once) and looks up its MPI entry
points. It fails if the interposer needs anything of its own beyond the runtime (fmt, spdlog,
libcrypto, libfabric, ...). Needs root or `unshare -r`; otherwise reports a skip (77).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rootfs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--loader", required=True, help="dlopen_check (needs only libc)")
    ap.add_argument("--interposer", required=True, help="liboptcast-mpi*.so")
    ap.add_argument("--mpi", required=True, help="regular expression for the MPI library's soname")
    a = ap.parse_args()

    prefix = rootfs.chroot_prefix()
    if prefix is None:
        print("skipped: chroot needs root or unprivileged user namespaces (unshare -r)")
        return rootfs.SKIP
    libs, _ = rootfs.resolved(a.interposer)
    mpi = [path for soname, path in libs.items() if re.search(a.mpi, soname)]
    if len(mpi) != 1:
        print(f"FAIL: {a.interposer} should need one MPI library matching {a.mpi}; it needs {sorted(libs)}")
        return 1
    with tempfile.TemporaryDirectory(prefix="optcast-rootfs-") as root:
        rootfs.add_runtime(root, a.loader)
        rootfs.add_with_dependencies(root, mpi[0])
        rootfs.copy_in(root, a.loader, "/bin/dlopen_check")
        name = os.path.basename(a.interposer)
        rootfs.copy_in(root, a.interposer, "/interposer/" + name)
        print("root filesystem:", " ".join(rootfs.listing(root)))
        cmd = prefix + [root, "/bin/dlopen_check", "/interposer/" + name, "MPI_Allreduce", "MPI_Iallreduce",
                        "MPI_Reduce_scatter_block", "MPI_Allgather"]
        r = subprocess.run(cmd, env={}, capture_output=True, text=True, timeout=60)
        sys.stdout.write(r.stdout + r.stderr)
        if r.returncode != 0:
            print(f"FAIL: {name} does not load with only the C/C++ runtime and its MPI library")
            return 1
    print(f"PASS: {name} loads with only the C/C++ runtime and {os.path.basename(mpi[0])}'s closure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
