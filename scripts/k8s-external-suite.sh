#!/usr/bin/env bash
# Kubernetes' whole external storage e2e suite against pillar (every
# External.Storage spec but the Disruptive and Serial ones), on the cluster
# of scripts/test-k8s-e2e.sh: 1.5-3 h per protocol on 2 cores under TCG, so
# not part of the test command (its k8s-e2e stage runs a handful of specs per
# protocol). The protocols run at once, one e2e.test each.
#
# usage: scripts/k8s-external-suite.sh [PROTOCOL...]   (default: nvmeof-tcp iscsi nfs)
# Last line:  k8s-external-suite: N passed, M failed   (skipped specs are not counted)
# The reports (e2e.log, junit.xml per protocol) stay in the run's work
# directory (/tmp/pillar-k8s-e2e.*/suite/) when anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
protocols=("$@")
((${#protocols[@]})) || protocols=(nvmeof-tcp iscsi nfs)
for p in "${protocols[@]}"; do
  [[ -f tests/k8s/cluster/drivers/$p.yaml ]] || { echo "$0: no test driver for protocol $p" >&2; exit 2; }
done
exec env K8S_E2E_NAME=k8s-external-suite PILLAR_K8S_E2E_PILLAR=1 PILLAR_K8S_E2E_SUITE=full \
  PILLAR_K8S_E2E_SUITE_PROTOCOLS="${protocols[*]}" ./scripts/test-k8s-e2e.sh
