#!/usr/bin/env bash
# From a fresh clone: install dependencies, build, and run every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
# The fault-injection tests over libfabric are left out: a server thread of their test process
# has crashed inside libfabric's completion-queue read once in several hundred runs (see
# docs/transports.md, "Known problems"); run them with `ctest --test-dir build -R e2e-ofi.E2eFaults`.
ctest --test-dir build --output-on-failure --timeout 300 -j 2 -E '^e2e-ofi\.E2eFaults\.'
