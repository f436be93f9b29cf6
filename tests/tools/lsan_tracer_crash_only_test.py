#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""scripts/lsan_tracer_crash_only.py tells LeakSanitizer's tracer crash from real failures."""
import os
import subprocess
import sys
import tempfile
import unittest
from xml.sax.saxutils import escape

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "lsan_tracer_crash_only.py")

# The shape of the failure as ctest recorded it: the child's checks passed, the tracer crashed
# in its exit-time leak check, and the parent saw exit code 1.
TRACER_CRASH = """[ RUN      ] ProxyErrors.WithFailoverOffServerDyingFailsCollectivesPromptly
[error] rank 0: lost the connection to server 127.0.0.1:41311
Tracer caught signal 11: addr=0x238 pc=0x56157b872fda sp=0x7fe000dfdd40
==10497==LeakSanitizer has encountered a fatal error.
==10497==HINT: For debugging, try setting environment variable LSAN_OPTIONS=verbosity=1:log_threads=1
tests/nccl/proxy_driver_test.cc:120: Failure
Expected equality of these values:
  (((status) & 0xff00) >> 8)
    Which is: 1
  codes[i]
    Which is: 0
server dies exited with 1
[  FAILED  ] ProxyErrors.WithFailoverOffServerDyingFailsCollectivesPromptly (244 ms)
"""

LEAK = """Tracer caught signal 11: addr=0x0
==1==LeakSanitizer has encountered a fatal error.
==2==ERROR: LeakSanitizer: detected memory leaks
x.cc:1: Failure
child exited with 1
"""

CHECK_FAILED = TRACER_CRASH.replace("server dies exited with 1\n",
                                    "server dies exited with 1\nx.cc:7: Failure\nExpected: 3 == 4\n")


def report(*cases):
    body = ""
    for name, output, failed in cases:
        status = "fail" if failed else "run"
        failure = '<failure message="Failed"/>' if failed else ""
        body += f'<testcase name="{name}" status="{status}">{failure}<system-out>{escape(output)}</system-out></testcase>'
    return f'<?xml version="1.0"?><testsuite>{body}</testsuite>'


class TracerCrashOnly(unittest.TestCase):
    def verdict(self, *cases):
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write(report(*cases))
        try:
            return subprocess.run([sys.executable, SCRIPT, f.name], capture_output=True, text=True).returncode
        finally:
            os.unlink(f.name)

    def test_only_tracer_crashes_are_rerun(self):
        self.assertEqual(self.verdict(("a", TRACER_CRASH, True), ("b", "[  PASSED  ]", False)), 0)

    def test_a_leak_report_is_a_real_failure(self):
        self.assertEqual(self.verdict(("a", LEAK, True)), 1)

    def test_a_failed_check_beside_the_crash_is_a_real_failure(self):
        self.assertEqual(self.verdict(("a", CHECK_FAILED, True)), 1)

    def test_one_real_failure_among_tracer_crashes_fails_them_all(self):
        self.assertEqual(self.verdict(("a", TRACER_CRASH, True), ("c", "x.cc:3: Failure\nboom\n", True)), 1)

    def test_nothing_failed_or_an_unreadable_report_is_not_rerun(self):
        self.assertEqual(self.verdict(("b", "[  PASSED  ]", False)), 1)
        self.assertEqual(subprocess.run([sys.executable, SCRIPT, "/nonexistent.xml"], capture_output=True).returncode, 1)


if __name__ == "__main__":
    unittest.main()
