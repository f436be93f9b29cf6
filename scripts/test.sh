#!/usr/bin/env bash
# From a fresh clone: install dependencies, build, and run every test suite. Prints the time of
# each step (setup, build, tests).
set -euo pipefail
cd "$(dirname "$0")/.."
step() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "=== test.sh: $name took $((SECONDS - start)) s ==="
}
step setup ./scripts/setup.sh
step build ./scripts/build.sh
step ctest ctest --test-dir build --output-on-failure --timeout 300 -j 2
