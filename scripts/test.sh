#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test:
#   1. unit and integration tests (ctest: real binaries, real gRPC, SQLite),
#   2. the libFuzzer targets for a short run each,
#   3. the real-kernel e2e suite in QEMU guests (tests/e2e/scenarios.sh).
# PILLAR_E2E=0 or PILLAR_FUZZ=0 skip a stage explicitly; a skipped stage is
# reported as skipped, never counted as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then echo "$0: run as root (it installs packages and drives loop devices)" >&2; exit 1; fi
./scripts/install-deps.sh
tests/e2e/deps.sh
./scripts/build.sh
t0=$(date +%s)
(cd "${PILLAR_BUILD_DIR:-build}" && ctest --output-on-failure -j2 --timeout 600)
echo "test: ctest took $(( $(date +%s) - t0 )) s"
if [[ "${PILLAR_FUZZ:-1}" == 1 ]]; then
  t0=$(date +%s)
  ./scripts/fuzz.sh
  echo "test: fuzzing took $(( $(date +%s) - t0 )) s"
else
  echo "test: fuzzing SKIPPED (PILLAR_FUZZ=0)"
fi
if [[ "${PILLAR_E2E:-1}" == 1 ]]; then
  t0=$(date +%s)
  tests/e2e/scenarios.sh
  echo "test: e2e took $(( $(date +%s) - t0 )) s"
else
  echo "test: e2e SKIPPED (PILLAR_E2E=0)"
fi
