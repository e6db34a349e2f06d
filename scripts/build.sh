#!/usr/bin/env bash
# Configures and builds pillar into ${PILLAR_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${PILLAR_BUILD_DIR:-build}
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${PILLAR_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build "$build" -j"${PILLAR_JOBS:-2}"
