# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Minimal root filesystems for the tests that check what a library needs to load.

A root holds the C/C++ runtime (libc, libm, libdl, libpthread, librt, ld-linux, libgcc_s,
libstdc++, copied from this machine at the paths the dynamic loader searches) and whatever a test
adds; programs run in it with chroot and an empty environment, so no LD_LIBRARY_PATH and no
loader cache reach a library that is not there.
"""

import os
import shutil
import subprocess
import sys

RUNTIME = ["libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libgcc_s.so.1", "libstdc++.so.6"]
SKIP = 77  # ctest's SKIP_RETURN_CODE in the suites that use this


def resolved(path):
    """{soname: host path} of what the loader resolves for `path`, and the dynamic loader's path."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    found, interp = {}, None
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            found[parts[0]] = parts[2]
        elif "=>" in parts and "not" in parts:
            sys.exit(f"ldd {path}: {parts[0]} not found on this machine")
        elif parts and parts[0].startswith("/") and "ld-linux" in parts[0]:
            interp = parts[0]
    return found, interp


def copy_in(root, host_path, as_path=None):
    """Copies host_path (symbolic links followed) into root at as_path (default: the same path)."""
    dest = root + (as_path or host_path)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copy(os.path.realpath(host_path), dest)
    return dest


def add_runtime(root, program):
    """The C/C++ runtime, found where the loader finds it for `program`, which must need no more."""
    libs, interp = resolved(program)
    extra = sorted(set(libs) - set(RUNTIME))
    if extra:
        sys.exit(f"{program} itself needs {', '.join(extra)}: it must need only the C/C++ runtime")
    if interp is None or "libc.so.6" not in libs:
        sys.exit(f"ldd {program} named no libc or dynamic loader")
    libdir = os.path.dirname(libs["libc.so.6"])
    for soname in RUNTIME:  # libdl, libpthread, librt: glibc's stubs, beside libc
        copy_in(root, libs.get(soname, os.path.join(libdir, soname)), os.path.join(libdir, soname))
    copy_in(root, interp)


def add_with_dependencies(root, library):
    """`library` and everything the loader resolves for it, at their paths on this machine."""
    libs, _ = resolved(library)
    for soname, path in libs.items():
        copy_in(root, path, os.path.join(os.path.dirname(path), soname))
    copy_in(root, library)


def listing(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def chroot_prefix():
    """The command that enters a root: chroot as root, else through a user namespace; None if neither.

    Absolute paths: the programs run with an empty environment, PATH included."""
    chroot, unshare = shutil.which("chroot"), shutil.which("unshare")
    if chroot is None:
        return None
    if os.geteuid() == 0:
        return [chroot]
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "-r", chroot, "/", "true"], capture_output=True)
    return [unshare, "-r", chroot] if probe.returncode == 0 else None
