#!/usr/bin/env bash
# Every Kubernetes-facing test against a real control plane (kube-apiserver,
# etcd, kube-controller-manager built from their Go modules by
# tests/k8s/build-tools.sh and cached outside the work tree), then one line:
#   k8s: N passed, M failed
# Each suite below prints its own closing line; this sums them.
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then echo "$0: run as root" >&2; exit 1; fi
build=${PILLAR_BUILD_DIR:-build}

passed=0
failed=0
run_suite() {  # run_suite NAME COMMAND...: counts the suite's "NAME: N passed, M failed" line
  local name=$1
  shift
  local log
  log=$(mktemp)
  echo "k8s: running $name"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed" "$log" | tail -1)
  rm -f "$log"
  if [[ -z "$line" ]]; then
    echo "k8s: $name printed no closing line (rc $rc): counted as 1 failure"
    failed=$((failed + 1))
    return
  fi
  local p f
  p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/' <<<"$line")
  f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
  if ((rc != 0 && f == 0)); then
    echo "k8s: $name exited $rc with no failure counted: counted as 1 failure"
    f=1
  fi
  passed=$((passed + p))
  failed=$((failed + f))
}

t0=$(date +%s)
if ! tests/k8s/build-tools.sh; then
  echo "k8s: the test tools could not be built"
  echo "k8s: 0 passed, 1 failed"
  exit 1
fi
run_suite k8s-harness tests/k8s/harness_test.sh
for suite in tests/k8s/suites/*.sh; do
  [[ -e "$suite" ]] || continue
  name=$(basename "$suite" .sh)
  PILLAR_BUILD_DIR=$build run_suite "$name" "$suite"
done
echo "k8s: took $(($(date +%s) - t0)) s"
echo "k8s: $passed passed, $failed failed"
((failed == 0))
