#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#
# Builds the libFuzzer targets (fuzz/) with clang into build-fuzz/ and runs each for a while on a
# copy of its seed corpus. Exits non-zero if any target crashes, leaks, hangs or breaks a check.
#
#   scripts/fuzz.sh            # 60 s per target
#   scripts/fuzz.sh 300        # 5 minutes per target
#   scripts/fuzz.sh 60 fuzz_framing fuzz_decode     # only these targets
#
# Targets run one after another (the fuzzers are single-process). Crash inputs and logs go to
# build-fuzz/findings/<target>/; the grown corpus to build-fuzz/corpus/<target>/ (the committed
# seeds in fuzz/corpus/ are never modified). Reproduce a crash with
#   build-fuzz/fuzz_<target> build-fuzz/findings/<target>/crash-<sha1>
# Environment: OPTCAST_SKIP_SETUP=1 skips installing packages; FUZZ_ARGS adds libFuzzer flags.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: $0 [seconds-per-target] [target...]" >&2
  exit 2
fi
targets=("$@")
if ((${#targets[@]} == 0)); then targets=(fuzz_decode fuzz_framing fuzz_server_session fuzz_auth_exchange fuzz_failover); fi

if [[ ${OPTCAST_SKIP_SETUP:-0} != 1 ]]; then ./scripts/setup.sh --fuzz; fi

CC=${CC:-clang}
CXX=${CXX:-clang++}
build="build-fuzz"
cmake -S fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$CC" \
  -DCMAKE_CXX_COMPILER="$CXX" >/dev/null
build_start=$SECONDS
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" fuzz_make_seeds
echo "=== fuzz.sh: build took $((SECONDS - build_start)) s ==="

# A report from any sanitizer is a crash; leaks count (libFuzzer checks them per input).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export OPTCAST_LOG_LEVEL=${OPTCAST_LOG_LEVEL:-off}

status=0
summary=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  findings="$build/findings/$t"
  log="$build/findings/$t.log"
  mkdir -p "$corpus" "$findings"
  # A working copy of the seeds: libFuzzer adds what it finds to the first corpus directory.
  if [[ -d fuzz/corpus/$t ]]; then cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true; fi
  max_len=4096
  if [[ $t == fuzz_framing ]]; then
    # Payloads of 32 KiB and more are received straight into the handler's buffer: large seeds
    # (generated, not committed) and room to mutate them.
    "$build/fuzz_make_seeds" --large "$build/corpus" >/dev/null
    max_len=131072
  fi
  echo "== $t: ${seconds}s on $(find "$corpus" -type f | wc -l) corpus inputs =="
  rc=0
  # shellcheck disable=SC2086  # FUZZ_ARGS is a list of flags
  "$build/$t" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
    -print_final_stats=1 -artifact_prefix="$findings/" ${FUZZ_ARGS:-} >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  artifacts=$(find "$findings" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | sort)
  if ((rc != 0)) || [[ -n $artifacts ]]; then
    status=1
    echo "!! $t FAILED (exit $rc); log: $log"
    grep -E -A40 '^==[0-9]+==ERROR|runtime error|FUZZ_CHECK failed|ERROR: libFuzzer|SUMMARY' "$log" | head -80 || true
    for a in $artifacts; do echo "   input: $a ($(stat -c %s "$a") bytes)"; done
    summary+=("$t: FAILED exit=$rc executions=${execs:-?} ${cov}")
  else
    summary+=("$t: ok executions=${execs:-?} (${speed:-?}/s) ${cov} corpus=$(find "$corpus" -type f | wc -l)")
  fi
done

echo "== fuzz summary ($(date -u +%Y-%m-%dT%H:%MZ), ${seconds}s per target) =="
printf '  %s\n' "${summary[@]}"
exit "$status"
