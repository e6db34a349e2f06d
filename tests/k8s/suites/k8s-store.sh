#!/usr/bin/env bash
# The store conformance suite (tests/store/store_conformance.cc) on the
# Kubernetes backend, against a real kube-apiserver and etcd, twice:
#   watch cache off   watches read etcd, so etcd's compaction is seen (410 Gone
#                     -> OUT_OF_RANGE, relist): the whole suite
#   watch cache on    the API server's default: every test but compaction
#                     (the cache keeps serving history etcd has dropped)
# The suite's kinds are pillar's kind names in a group of their own with
# schemaless CRDs, so the conformance objects need not be pillar's. Last line:
#   k8s-store: N passed, M failed
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=$(cd "$here/../.." && pwd)
build=${PILLAR_BUILD_DIR:-$root/build}
[[ $build == /* ]] || build=$root/$build
# shellcheck source=../lib.sh
source "$here/lib.sh"

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1${2:+: $2}"; }
finish() {
  echo "k8s-store: $passed passed, $failed failed"
  ((failed == 0))
  exit
}
group=conformance.pillar-csi.bhyoo.com
bin=$build/tests/store_kube_live_test
[[ -x $bin ]] || { fail "built" "$bin is missing"; finish; }

crds() {
  local kind plural
  for kind in PillarVolumeState PillarAgent PillarNode; do
    plural=$(tr '[:upper:]' '[:lower:]' <<<"$kind")s
    cat <<YAML
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: $plural.$group
spec:
  group: $group
  scope: Cluster
  names: {kind: $kind, plural: $plural, singular: ${plural%s}, listKind: ${kind}List}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
YAML
  done
}

# run MODE FILTER: one API server, the suite's CRDs, the binary; gtest's
# counts are added to ours.
run() {
  local mode=$1 filter=$2 W out p f t0
  W=$(mktemp -d "${TMPDIR:-/tmp}/pillar-k8s-store.XXXXXX")
  if ! k8s_up "$W"; then
    fail "$mode: k8s_up"
    return
  fi
  if ! crds | k8s_kubectl apply -f - >"$W/crds.out" 2>&1 ||
    ! k8s_kubectl wait --for=condition=Established --timeout=60s \
      "crd/pillarvolumestates.$group" "crd/pillaragents.$group" "crd/pillarnodes.$group" >>"$W/crds.out" 2>&1; then
    fail "$mode: conformance CRDs established" "$(cat "$W/crds.out")"
    k8s_down "$W"
    return
  fi
  t0=$SECONDS
  out=$W/gtest.out
  PILLAR_TEST_KUBECONFIG=$K8S_KUBECONFIG PILLAR_TEST_ETCD=$K8S_ETCD PILLAR_TEST_GROUP=$group \
    "$bin" --gtest_filter="$filter" >"$out" 2>&1
  grep -E '^\[ +(OK|FAILED) +\] |Failure|error' "$out" | grep -v '^\[  FAILED  \] [0-9]* test' | sed "s/^/$mode: /" | head -80
  p=$(grep -cE '^\[       OK \] ' "$out")
  f=$(grep -E '^\[  FAILED  \] [A-Za-z]' "$out" | grep -vc ' tests\?, listed below' || true)
  if ((p + f == 0)); then
    fail "$mode: the suite ran" "$(tail -20 "$out")"
  else
    passed=$((passed + p))
    failed=$((failed + f))
    echo "k8s-store: $mode: $p passed, $f failed in $((SECONDS - t0)) s"
  fi
  k8s_down "$W"
  ((f == 0)) && rm -rf "$W"
}

k8s_tools || { fail "tools"; finish; }
K8S_APISERVER_ARGS="--watch-cache=false" run "watch cache off" '*'
K8S_APISERVER_ARGS="" run "watch cache on" '-*Compacted*'
finish
