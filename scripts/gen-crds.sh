#!/usr/bin/env bash
# Regenerates deploy/crds/ from the one API definition (src/api) with
# `pillarctl crds --dir`; tests/api checks that the kept files match it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PILLAR_BUILD_DIR:-build}
cmake --build "$build" --target pillarctl >/dev/null
mkdir -p deploy/crds
"$build/src/ctl/pillarctl" crds --dir deploy/crds
