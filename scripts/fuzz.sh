#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan, halting on the first
# report: -fno-sanitize-recover=all) and runs each for a short while
# (PILLAR_FUZZ_SECONDS, default 20). A crash, a sanitizer report or a target
# that does not start counts as a failure of that target; every target runs.
# Ends with "fuzz: N passed, M failed"; exit != 0 on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${PILLAR_FUZZ_BUILD_DIR:-build-fuzz}
secs=${PILLAR_FUZZ_SECONDS:-20}
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
passed=0 failed=0
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  seeds="fuzz/seeds/$t"
  args=("$build/corpus/$t")
  [[ -d "$seeds" ]] && args+=("$seeds")
  echo "fuzz: $t for ${secs}s"
  log="$build/$t.log"
  if "$build/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$build/$t-" \
    "${args[@]}" >"$log" 2>&1; then
    grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$log" || true
    echo "PASS: $t"
    passed=$((passed + 1))
  else
    tail -40 "$log"
    echo "FAIL: $t found a crash or a sanitizer report (reproducer in $build/$t-*, log $log)"
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
((failed == 0))
