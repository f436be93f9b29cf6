#!/usr/bin/env bash
# From a fresh clone: install dependencies, build, and run every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
ctest --test-dir build --output-on-failure --timeout 300 -j 2
