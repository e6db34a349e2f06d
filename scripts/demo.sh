#!/usr/bin/env bash
# Installs what is missing, builds, and runs the local demonstration.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
echo "demo: built; the agent demonstration lands with the agent binary"
