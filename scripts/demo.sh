#!/usr/bin/env bash
# From a fresh clone: install dependencies, build, and run `optcast demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
exec ./build/tools/optcast demo "$@"
