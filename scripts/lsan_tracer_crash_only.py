#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Exit 0 when every failed test in a ctest JUnit report failed only because LeakSanitizer's
tracer crashed at a process's exit (google/sanitizers#1353), 1 otherwise.

A failure of that kind has the tracer's crash in its output and no sanitizer report, no timeout
and no gtest failure other than a child process's exit code. scripts/sanitize.sh reruns such tests
once; any other failure stands.
"""
import re
import sys
import xml.etree.ElementTree as ET

TRACER_CRASH = "LeakSanitizer has encountered a fatal error"
# Anything that is a real finding or a real failure of the test's own checks.
REAL = re.compile(
    r"ERROR: (AddressSanitizer|LeakSanitizer: detected|ThreadSanitizer)|runtime error:|SUMMARY: "
    r"|still running after the deadline|died of signal|Timeout"
)
# gtest's report of a failed expectation: "file.cc:N: Failure" and the lines after it.
FAILURE = re.compile(r"^\S+:\d+: Failure$", re.M)
CHILD_EXIT = re.compile(r"exited with 1\s*$", re.M)


def tracer_crash_only(output: str) -> bool:
    if TRACER_CRASH not in output or "Tracer caught signal" not in output or REAL.search(output):
        return False
    # Each gtest failure must be a child's exit code of 1 (what the tracer's crash turns into).
    failures = len(FAILURE.findall(output))
    return failures == len(CHILD_EXIT.findall(output))


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: lsan_tracer_crash_only.py CTEST_JUNIT_XML", file=sys.stderr)
        return 2
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"lsan_tracer_crash_only: cannot read {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    failed = []
    for case in root.iter("testcase"):
        if case.find("failure") is None and case.find("error") is None and case.get("status") != "fail":
            continue
        text = "".join(e.text or "" for e in case.iter() if e.tag in ("system-out", "failure", "error"))
        failed.append((case.get("name"), tracer_crash_only(text)))
    if not failed:
        return 1
    for name, only in failed:
        print(f"  {name}: {'LeakSanitizer tracer crash only' if only else 'a real failure'}")
    return 0 if all(only for _, only in failed) else 1


if __name__ == "__main__":
    sys.exit(main())
