#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: unit and integration
# tests through ctest, then the real-kernel e2e suite (PILLAR_E2E=0 skips it
# explicitly; a skipped suite is reported as skipped, never as passed).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
(cd "${PILLAR_BUILD_DIR:-build}" && ctest --output-on-failure -j2 --timeout 600)
