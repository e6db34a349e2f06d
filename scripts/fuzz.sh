#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a short while
# (PILLAR_FUZZ_SECONDS, default 20). A crash fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${PILLAR_FUZZ_BUILD_DIR:-build-fuzz}
secs=${PILLAR_FUZZ_SECONDS:-20}
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPILLAR_BUILD_FUZZ=ON -DPILLAR_BUILD_TESTS=OFF -DPILLAR_BUILD_BENCH=OFF >/dev/null
mapfile -t targets < <(cd fuzz && ls ./*_fuzz.cc | sed 's|^\./||; s|\.cc$||')
cmake --build "$build" -j"${PILLAR_JOBS:-2}" --target "${targets[@]}"
mkdir -p "$build/corpus"
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  seeds="fuzz/seeds/$t"
  args=("$build/corpus/$t")
  [[ -d "$seeds" ]] && args+=("$seeds")
  echo "fuzz: $t for ${secs}s"
  log="$build/$t.log"
  if ! "$build/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$build/" \
    "${args[@]}" >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz: $t found a crash (reproducer in $build, log $log)"
    exit 1
  fi
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$log" || true
done
echo "fuzz: ${#targets[@]} targets ran without a crash"
