#!/usr/bin/env bash
# pillar in a running cluster: kubelet nodes (containerd 2.x, runc, CNI) in
# the real-kernel guests of tests/e2e/lib.sh, the control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler) beside them, pillar
# installed with helm, workloads on its volumes. See tests/k8s/cluster/README.md.
#
# Everything runs inside a network namespace made here (the guests' hub, the
# control plane, kubectl and helm): the private addresses never reach the root
# namespace, and deleting the namespace on exit leaves nothing behind.
#
# Last line:  k8s-e2e: N passed, M failed
# Env: PILLAR_K8S_E2E=0 skips the stage (reported as skipped, never passed);
#      PILLAR_K8S_E2E_PILLAR=0 leaves pillar out (only the nodes and a
#      first pod; no CSI sidecars or helm needed);
#      PILLAR_K8S_E2E_SUITE=ci|full|0 Kubernetes' external storage specs
#      (tests/k8s/cluster/external-suite.sh; full: scripts/k8s-external-suite.sh);
#      K8S_E2E_NAME the name on the last line (default k8s-e2e);
#      PILLAR_BUILD_DIR (default build), the knobs of tests/e2e/lib.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
[[ $(id -u) -eq 0 ]] || { echo "$0: run as root" >&2; exit 1; }
if [[ ${PILLAR_K8S_E2E:-1} == 0 ]]; then
  echo "k8s-e2e: skipped (PILLAR_K8S_E2E=0)"
  exit 0
fi
# K8S_E2E_NAME names the last line (scripts/k8s-external-suite.sh sets it).
name=${K8S_E2E_NAME:-k8s-e2e}
say() { printf '%s: %s\n' "$name" "$*"; }
t0=$SECONDS

# Tools, each cached by version outside the tree (progress on stderr).
node_tools=(loopback host-local bridge portmap runc ctr containerd-shim-runc-v2 containerd kubelet kube-scheduler)
say "building or finding the tools (cold: ~30 min on 2 cores; cached after)"
# pillar installed with helm and the workloads on its volumes
# (tests/k8s/cluster/pillar.sh); PILLAR_K8S_E2E_PILLAR=0 runs only the nodes
# and a first pod (no CSI sidecars or helm needed).
nodes_only=1
[[ ${PILLAR_K8S_E2E_PILLAR:-1} != 1 ]] || nodes_only=0
# e2e.test for Kubernetes' external storage suite (tests/k8s/cluster/external-suite.sh).
[[ $nodes_only == 1 || ${PILLAR_K8S_E2E_SUITE:-ci} == 0 ]] || node_tools+=(e2e.test)
CSI_BIN=""
if ! K8S_BIN=$(tests/k8s/build-tools.sh | tail -1) ||
  { [[ $nodes_only != 1 ]] &&
    ! CSI_BIN=$(tests/k8s/build-csi-tools.sh csi-provisioner csi-attacher csi-resizer csi-snapshotter snapshot-controller helm | tail -1); } ||
  ! NODE_BIN=$(tests/k8s/build-node-tools.sh "${node_tools[@]}" | tail -1); then
  say "the tools could not be built"
  echo "$name: 0 passed, 1 failed"
  exit 1
fi
export K8S_BIN CSI_BIN NODE_BIN
say "tools ready after $((SECONDS - t0)) s"
# pillar's images from the built binaries (cached: a second run rebuilds
# nothing), and the guest image of tests/e2e.
build=${PILLAR_BUILD_DIR:-build}
if ! scripts/build-images.sh --install-deps >/dev/null || { [[ $nodes_only != 1 ]] &&
  ! PILLAR_BUILD_DIR=$build scripts/build-images.sh --no-build; } >"${TMPDIR:-/tmp}/k8s-e2e-images.$$.log" 2>&1; then
  say "pillar's images could not be built: $(tail -3 "${TMPDIR:-/tmp}/k8s-e2e-images.$$.log" 2>/dev/null)"
  rm -f "${TMPDIR:-/tmp}/k8s-e2e-images.$$.log"
  echo "$name: 0 passed, 1 failed"
  exit 1
fi
rm -f "${TMPDIR:-/tmp}/k8s-e2e-images.$$.log"
export PILLAR_BUILD_DIR=$build

# Everything that needs the network happens here, before the namespace: the
# guests' packages and root image (tests/e2e), the nodes' images.
ns=pillar-k8s-$$
images=$(mktemp -d "${TMPDIR:-/tmp}/pillar-k8s-images.XXXXXX")
cleanup() {
  local rc=$?
  # Whatever the inner run left in the namespace (it stops its own; this is
  # the backstop for a killed run): every process, then the namespace.
  local pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  if [[ -n $pids ]]; then
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 1
  fi
  ip netns delete "$ns" 2>/dev/null || true
  rm -rf "$images"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if ! tests/e2e/deps.sh >/dev/null || ! tests/e2e/build-image.sh >/dev/null; then
  say "the guests' packages or root image could not be installed"
  echo "$name: 0 passed, 1 failed"
  exit 1
fi
say "making the nodes' images"
t_img=$SECONDS
kinds=(pause busybox registrar pillar-agent pillar-controller pillar-node csi-provisioner csi-attacher csi-resizer csi-snapshotter)
[[ $nodes_only != 1 ]] || kinds=(pause busybox registrar)
if ! bash tests/k8s/cluster/images.sh "$images" "${kinds[@]}" >"$images/list" 2>"$images/log"; then
  say "the nodes' images could not be made: $(tail -3 "$images/log")"
  echo "$name: 0 passed, 1 failed"
  exit 1
fi
echo "figure: nodes' images made in $((SECONDS - t_img)) s"
export PILLAR_K8S_IMAGES=$images
# The VolumeSnapshot CRDs of the snapshotter's release (its client module's
# files, from the Go module cache: maybe a download, so before the namespace).
if [[ $nodes_only != 1 ]]; then
  mkdir -p "$images/snapshot-crds"
  if ! crds=$(tests/k8s/snapshot-crds.sh) || ! xargs cp -t "$images/snapshot-crds" <<<"$crds"; then
    say "the VolumeSnapshot CRDs could not be found (tests/k8s/snapshot-crds.sh)"
    echo "$name: 0 passed, 1 failed"
    exit 1
  fi
  export PILLAR_SNAPSHOT_CRDS=$images/snapshot-crds
fi

ip netns add "$ns"
ip -n "$ns" link set lo up
rc=0
nsenter --net="/run/netns/$ns" -- bash "$root/tests/k8s/cluster/cluster.sh" || rc=$?
say "took $((SECONDS - t0)) s"
exit "$rc"
