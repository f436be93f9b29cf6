#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#
# Builds Optcast with sanitizers and runs the test suites under them.
#
#   scripts/sanitize.sh            # address,undefined into build-asan/, every suite but emu
#   scripts/sanitize.sh address    # the same
#   scripts/sanitize.sh thread     # thread into build-tsan/, the suites that run threads (e2e, tree, nccl, ...)
#
# Extra arguments after the mode go to ctest (e.g. -R e2e. or --repeat until-fail:3).
# Environment: CC/CXX pick the compiler (default: clang, which builds the instrumented code in
# about two thirds of GCC's time; CC=gcc CXX=g++ works too),
# OPTCAST_SANITIZE_JOBS the ctest parallelism (default 2), OPTCAST_SKIP_SETUP=1 skips
# scripts/setup.sh. Any sanitizer report fails the run; the only suppression is libfabric's own
# leak in its progress calls, in the suites over libfabric (tests/lsan-libfabric.supp).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-address}
shift || true
case "$mode" in
  address | asan | address,undefined)
    mode=address
    sanitize="address,undefined"
    build_dir=build-asan
    # Every suite except emu (it needs root and network namespaces and runs the optcast binary
    # in other namespaces; the sanitizers add nothing there that the other suites do not cover)
    # and the suites that load our libraries into programs built without the sanitizer runtime
    # (mpirun'd MPI programs, the Python interpreter for the PyTorch backend), and sim, a SimGrid
    # model that shares no code with the server path.
    ctest_select=(-LE '^(emu|mpi|torch|sim)$')
    build_targets=(all)
    ;;
  thread | tsan)
    mode=thread
    sanitize="thread"
    build_dir=build-tsan
    # Only the suites that run several threads in one process: server (the reduction workers),
    # e2e (servers on threads of the test process), tree (a tree of servers on threads), nccl
    # (servers on threads, ranks and NCCL proxy threads calling the plugin concurrently) and
    # observe (metrics and traces written from several threads while an HTTP thread renders
    # them). unit, reduce and ring are single-threaded (ring forks processes); transport only
    # dials on a thread that is joined before the connection is used.
    ctest_select=(-L '^(e2e|tree|nccl|server|observe)$')
    # Only the executables of those suites (and what they depend on) are built. A suite added to
    # the selection without its target here fails loudly: ctest cannot find its executable.
    build_targets=(optcast_e2e_test optcast_tree_test optcast_nccl_test optcast_nccl_proxy_test
      optcast_nccl_forward_test optcast_server_test optcast_observe_test)
    ;;
  *)
    echo "usage: $0 [address|thread] [ctest arguments...]" >&2
    exit 2
    ;;
esac

# --fuzz: clang and its sanitizer runtimes, beside the build's own packages.
if [[ ${OPTCAST_SKIP_SETUP:-0} != 1 ]]; then ./scripts/setup.sh --fuzz; fi
export CC=${CC:-clang} CXX=${CXX:-clang++}

# halt_on_error: a UBSan report is a failure, not a line in a log nobody reads.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-print_suppressions=0}

# ThreadSanitizer maps its shadow at fixed addresses; with a large mmap randomisation
# (vm.mmap_rnd_bits > 28 on recent kernels) it aborts with "unexpected memory mapping".
# Running without address randomisation avoids that; the build runs under it too because
# gtest_discover_tests runs the test binaries at build time.
wrap=()
if [[ $mode == thread ]] && command -v setarch >/dev/null && setarch "$(uname -m)" -R true 2>/dev/null; then
  wrap=(setarch "$(uname -m)" -R)
fi

# The torch backend is not built: its suite runs inside the Python interpreter, which has no
# sanitizer runtime. ccache, where installed, makes a rebuild of an unchanged tree cheap.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# -O1 -g1: the sanitizers' usual optimisation level, and line tables (enough for file:line in
# every report) without full debug information. Together they take about a third of the compile
# time of -O2 -g, which keeps both sanitizer builds inside the CI budget on 2 cores.
# The scale simulator and the Gloo baseline share no code with what runs under the sanitizers.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOPTCAST_SANITIZE="$sanitize" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DOPTCAST_BUILD_TESTS=ON -DOPTCAST_BUILD_BENCH=OFF -DOPTCAST_BUILD_TORCH=OFF -DOPTCAST_BUILD_SIM=OFF \
  -DOPTCAST_BUILD_GLOO_BENCH=OFF "${launcher[@]}" >/dev/null
build_start=$SECONDS
"${wrap[@]}" cmake --build "$build_dir" -j "$(nproc)" --target "${build_targets[@]}"
echo "=== sanitize.sh $mode: build took $((SECONDS - build_start)) s ==="

echo "== ctest under -fsanitize=$sanitize (${ctest_select[*]}) =="
test_start=$SECONDS
junit="$build_dir/ctest-sanitize.xml"
rc=0
"${wrap[@]}" ctest --test-dir "$build_dir" --output-on-failure --timeout 600 -j "${OPTCAST_SANITIZE_JOBS:-2}" \
  --output-junit "$(pwd)/$junit" "${ctest_select[@]}" "$@" || rc=$?
# LeakSanitizer's own stop-the-world tracer sometimes crashes at a process's exit ("Tracer caught
# signal 11 ... LeakSanitizer has encountered a fatal error", google/sanitizers#1353): the test's
# checks all passed and no leak was reported, but the exit code is 1. Only when that is the sole
# failure of every failed test are those tests run once more; any other failure fails at once.
if ((rc != 0)) && [[ $mode == address ]] && python3 scripts/lsan_tracer_crash_only.py "$junit"; then
  echo "== rerunning the tests above whose only failure was LeakSanitizer's tracer crashing =="
  rc=0
  "${wrap[@]}" ctest --test-dir "$build_dir" --output-on-failure --timeout 600 --rerun-failed || rc=$?
fi
((rc == 0)) || exit "$rc"
echo "=== sanitize.sh $mode: ctest took $((SECONDS - test_start)) s ==="
