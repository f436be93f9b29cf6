#!/usr/bin/env bash
# Configures and builds Optcast into build/ (or $OPTCAST_BUILD_DIR). Extra arguments go to cmake
# and come after the defaults here, so they win.
#
# -O2 -g1: optimised, with line tables (file:line in backtraces, perf and sanitizer reports) but
# no variable locations; a third less compile time than -g. For a debugger session pass
#   scripts/build.sh -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG"
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${OPTCAST_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
