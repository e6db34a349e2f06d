#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan, halting on the first
# report: -fno-sanitize-recover=all) and runs each for a short while
# (PILLAR_FUZZ_SECONDS, default 8), one per core at a time. A crash, a
# sanitizer report or a target that does not start counts as a failure of
# that target; every target runs.
# Ends with "fuzz: N passed, M failed"; exit != 0 on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${PILLAR_FUZZ_BUILD_DIR:-build-fuzz}
secs=${PILLAR_FUZZ_SECONDS:-8}
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
# Belt and braces: even a binary built without -fno-sanitize-recover stops here.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
mapfile -t targets < <(cd fuzz && ls ./*_fuzz.cc | sed 's|^\./||; s|\.cc$||')
if ! CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPILLAR_BUILD_FUZZ=ON -DPILLAR_BUILD_TESTS=OFF -DPILLAR_BUILD_BENCH=OFF >/dev/null ||
  ! cmake --build "$build" -j"${PILLAR_JOBS:-2}" --target "${targets[@]}"; then
  echo "fuzz: the fuzz targets did not build"
  echo "fuzz: 0 passed, ${#targets[@]} failed"
  exit 1
fi
mkdir -p "$build/corpus"
# run_one T: fuzzes T, prints its report, exits 0 when it ran clean.
run_one() {
  local t=$1 seeds="fuzz/seeds/$1" log="$build/$1.log"
  local -a args=("$build/corpus/$t")
  mkdir -p "$build/corpus/$t"
  [[ -d "$seeds" ]] && args+=("$seeds")
  if "$build/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$build/$t-" \
    "${args[@]}" >"$log" 2>&1; then
    { grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$log" || true; } | sed "s/^/$t /"
    echo "PASS: $t"
  else
    tail -40 "$log"
    echo "FAIL: $t found a crash or a sanitizer report (reproducer in $build/$t-*, log $log)"
    return 1
  fi
}
# PILLAR_FUZZ_JOBS targets at a time (default: one per core), each its own
# process with its own corpus; every target still gets its full ${secs}s.
jobs=${PILLAR_FUZZ_JOBS:-$(nproc)}
echo "fuzz: ${#targets[@]} targets, ${secs}s each, $jobs at a time"
passed=0 failed=0 running=0
reap() { # waits for one target to end and counts it
  local rc=0
  wait -n || rc=$?
  if ((rc == 0)); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  running=$((running - 1))
}
for t in "${targets[@]}"; do
  ((running < jobs)) || reap
  run_one "$t" &
  running=$((running + 1))
done
while ((running > 0)); do reap; done
echo "fuzz: $passed passed, $failed failed"
((failed == 0))
