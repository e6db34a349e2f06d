#!/usr/bin/env bash
# Copies pillar's CRDs (deploy/crds, generated from src/api by
# scripts/gen-crds.sh) into the Helm chart (charts/pillar/crds), which must
# hold the same files byte for byte; tests/k8s/suites/k8s-chart.sh checks it.
#   scripts/sync-chart-crds.sh           copy
#   scripts/sync-chart-crds.sh --check   exit 1 (naming the files) if they differ
set -euo pipefail
cd "$(dirname "$0")/.."
src=deploy/crds dst=charts/pillar/crds
case ${1:-copy} in
  copy)
    mkdir -p "$dst"
    rm -f "$dst"/*.yaml
    cp "$src"/*.yaml "$dst"/
    ;;
  --check)
    if ! diff -r "$src" "$dst" >/dev/null; then
      diff -rq "$src" "$dst" >&2 || true
      echo "sync-chart-crds: $dst differs from $src; run $0" >&2
      exit 1
    fi
    ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
