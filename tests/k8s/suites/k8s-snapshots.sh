#!/usr/bin/env bash
# The cluster's half of snapshots, without a kubelet: the VolumeSnapshot CRDs
# of the external-snapshotter release the harness builds (its client module's
# config/crd, tests/k8s/snapshot-crds.sh) and snapshot-controller of that
# release (tests/k8s/build-csi-tools.sh) beside a real kube-apiserver and
# kube-controller-manager (tests/k8s/lib.sh), as the running-cluster stage
# (tests/k8s/cluster) sets them up, and the chart's VolumeSnapshotClass:
#   - the CRDs Established; snapshot-controller starts its controller
#   - the chart rendered with controller.sidecars.snapshotter.enabled:
#     helm lint --strict; its VolumeSnapshotClass (default values, and
#     detached + default class) accepted by the CRDs' schema as rendered,
#     and none rendered with the sidecar off
#   - a VolumeSnapshot of a PVC bound to a pillar PV: snapshot-controller
#     makes its VolumeSnapshotContent for pillar's driver, with the chart's
#     class, the PV's volume handle and deletion policy Delete (what the
#     csi-snapshotter sidecar beside pillar's controller acts on), and puts
#     its finalizers on the snapshot
# Last line:  k8s-snapshots: N passed, M failed
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib.sh
source "$here/lib.sh"
# shellcheck source=../pillar.sh
source "$here/pillar.sh"
# shellcheck source=../suite.sh
source "$here/suite.sh"
suite_begin k8s-snapshots snapshot-controller.log snapshot-crds.log kube-controller-manager.log

chart=$root/charts/pillar
DRIVER=pillar-csi.bhyoo.com

# ---- tools: snapshot-controller, helm, the CRD files ---------------------------
k8s_tools || { fail "k8s tools (tests/k8s/build-tools.sh)"; finish; }
if ! CSI_BIN=$("$here/build-csi-tools.sh" snapshot-controller helm | tail -1) ||
  [[ ! -x $CSI_BIN/snapshot-controller || ! -x $CSI_BIN/helm ]]; then
  fail "snapshot-controller and helm built by tests/k8s/build-csi-tools.sh"
  finish
fi
ver=$("$CSI_BIN/snapshot-controller" --version 2>&1 | grep -o 'v[0-9][0-9.]*' | head -1)
sidecar=$(sed -n '/snapshotter:/,/tag:/s/^ *tag: *//p' "$chart/values.yaml" | head -1)
if [[ -n $ver && $ver == "$sidecar" ]]; then
  ok "snapshot-controller $ver: the release of the chart's csi-snapshotter sidecar"
else
  fail "snapshot-controller's release is the chart's csi-snapshotter tag" "snapshot-controller [$ver], chart [$sidecar]"
fi
mapfile -t crds < <("$here/snapshot-crds.sh")
if ((${#crds[@]} == 3)) && [[ ${crds[0]} == */client/v8@"$ver"/config/crd/* ]]; then
  ok "the three VolumeSnapshot CRD files of external-snapshotter client/v8@$ver"
else
  fail "the VolumeSnapshot CRD files (tests/k8s/snapshot-crds.sh)" "${crds[*]:-none}"
  finish
fi
export HELM_CACHE_HOME=$W/helm/cache HELM_CONFIG_HOME=$W/helm/config HELM_DATA_HOME=$W/helm/data
helm() { "$CSI_BIN/helm" "$@"; }

# ---- the chart's VolumeSnapshotClass, rendered -------------------------------------
snap_on=(--set controller.sidecars.snapshotter.enabled=true)
if out=$(helm lint --strict "$chart" "${snap_on[@]}" 2>&1); then
  ok "helm lint --strict with controller.sidecars.snapshotter.enabled=true"
else
  fail "helm lint --strict with the snapshotter" "$(tail -5 <<<"$out")"
fi
render() { # render OUT HELM-ARGS...: only the VolumeSnapshotClass template
  local out=$1
  shift
  helm template pillar "$chart" --namespace pillar-system --show-only templates/volumesnapshotclass.yaml "$@" >"$out" 2>&1
}
if render "$W/vsc-off.yaml" || grep -q 'could not find template' "$W/vsc-off.yaml"; then
  if grep -q '^kind: VolumeSnapshotClass' "$W/vsc-off.yaml"; then
    fail "no VolumeSnapshotClass with the sidecar off" "$(head -5 "$W/vsc-off.yaml")"
  else
    ok "no VolumeSnapshotClass with the sidecar off"
  fi
else
  fail "helm template with the sidecar off" "$(tail -3 "$W/vsc-off.yaml")"
fi
render "$W/vsc.yaml" "${snap_on[@]}" || fail "helm template with the snapshotter" "$(tail -3 "$W/vsc.yaml")"
render "$W/vsc-detached.yaml" "${snap_on[@]}" --set volumeSnapshotClass.name=pillar-snapshots-detached \
  --set volumeSnapshotClass.detached=true --set volumeSnapshotClass.default=true ||
  fail "helm template of a detached default class" "$(tail -3 "$W/vsc-detached.yaml")"

# ---- control plane, CRDs, snapshot-controller ----------------------------------------
k8s_up "$W" || { fail "etcd and kube-apiserver up"; finish; }
k8s_start_controller_manager "$W" || { fail "kube-controller-manager up"; finish; }
t0=$(now_ms)
if k8s_start_snapshot_controller "$W" "$CSI_BIN/snapshot-controller" "${crds[@]}"; then
  ok "VolumeSnapshot CRDs Established, snapshot-controller started its controller"
  echo "figure: CRDs applied and snapshot-controller started in $(since "$t0") s"
else
  fail "VolumeSnapshot CRDs and snapshot-controller"
  finish
fi
for r in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
  if v=$(kubectl get crd "$r.snapshot.storage.k8s.io" -o jsonpath='{.spec.versions[?(@.storage==true)].name}') && [[ $v == v1 ]]; then
    ok "CRD $r.snapshot.storage.k8s.io stores v1"
  else
    fail "CRD $r.snapshot.storage.k8s.io stores v1" "${v:-absent}"
  fi
done

# The classes as rendered, through the CRD's schema (server-side apply).
if kubectl apply --server-side --field-manager=pillar-snapshot-test -f "$W/vsc.yaml" -f "$W/vsc-detached.yaml" >"$W/apply.out" 2>&1; then
  ok "the chart's VolumeSnapshotClasses accepted by the CRD (default; detached and default class)"
else
  fail "the chart's VolumeSnapshotClasses accepted by the CRD" "$(cat "$W/apply.out")"
fi
got=$(kubectl get volumesnapshotclass pillar-snapshots -o jsonpath='{.driver} {.deletionPolicy} {.parameters}' 2>&1)
if [[ $got == "$DRIVER Delete " ]]; then
  ok "VolumeSnapshotClass pillar-snapshots: driver $DRIVER, deletionPolicy Delete, no parameters"
else
  fail "VolumeSnapshotClass pillar-snapshots as rendered" "$got"
fi
got=$(kubectl get volumesnapshotclass pillar-snapshots-detached \
  -o jsonpath='{.parameters.detached} {.metadata.annotations.snapshot\.storage\.kubernetes\.io/is-default-class}' 2>&1)
if [[ $got == "true true" ]]; then
  ok "VolumeSnapshotClass pillar-snapshots-detached: parameters.detached \"true\", the default class"
else
  fail "the detached default class as rendered" "$got"
fi
kubectl delete volumesnapshotclass pillar-snapshots-detached >/dev/null 2>&1

# ---- a VolumeSnapshot to its VolumeSnapshotContent -------------------------------
# A PV of pillar's driver bound to a PVC (kube-controller-manager binds them);
# no pillar controller runs here, so the content stays not ready: what is
# checked is the content snapshot-controller hands the sidecar.
kubectl apply -f - >"$W/err" 2>&1 <<YAML || fail "a PV of pillar's driver and its PVC" "$(cat "$W/err")"
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-snap-source}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: pillar-nvmeof-tcp
  claimRef: {namespace: default, name: snap-source}
  csi: {driver: $DRIVER, volumeHandle: pvc-snap-source-handle, fsType: ext4}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: snap-source, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: pillar-nvmeof-tcp
  volumeName: pv-snap-source
  resources: {requests: {storage: 64Mi}}
YAML
pvc_bound() { [[ $(kubectl -n default get pvc snap-source -o jsonpath='{.status.phase}') == Bound ]]; }
wait_for 60 pvc_bound >/dev/null || fail "PVC snap-source Bound" "$(kubectl -n default describe pvc snap-source 2>&1 | tail -5)"
t0=$(now_ms)
kubectl apply -f - >"$W/err" 2>&1 <<YAML || fail "a VolumeSnapshot applied" "$(cat "$W/err")"
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: snap-1, namespace: default}
spec:
  volumeSnapshotClassName: pillar-snapshots
  source: {persistentVolumeClaimName: snap-source}
YAML
content_of() { kubectl -n default get volumesnapshot snap-1 -o jsonpath='{.status.boundVolumeSnapshotContentName}'; }
has_content() { [[ -n $(content_of) ]]; }
if took=$(wait_for 60 has_content); then
  c=$(content_of)
  echo "figure: VolumeSnapshot to its VolumeSnapshotContent in $took s"
  got=$(kubectl get volumesnapshotcontent "$c" -o json | jq -r '[.spec.driver, .spec.volumeSnapshotClassName,
      .spec.source.volumeHandle, .spec.deletionPolicy, .spec.volumeSnapshotRef.name, .spec.volumeSnapshotRef.namespace] | join(" ")')
  if [[ $got == "$DRIVER pillar-snapshots pvc-snap-source-handle Delete snap-1 default" ]]; then
    ok "snapshot-controller made VolumeSnapshotContent $c: driver $DRIVER, class pillar-snapshots, the PV's handle, Delete"
  else
    fail "the VolumeSnapshotContent snapshot-controller made" "$got"
  fi
  got=$(kubectl -n default get volumesnapshot snap-1 -o jsonpath='{.status.readyToUse} {.metadata.finalizers}')
  if [[ $got == false* && $got == *snapshot.storage.kubernetes.io/volumesnapshot-bound-protection* ]]; then
    ok "the VolumeSnapshot bound, not ready (no sidecar here), with snapshot-controller's finalizers"
  else
    fail "the VolumeSnapshot's status and finalizers" "$got"
  fi
else
  fail "snapshot-controller binds the VolumeSnapshot to a content" \
    "$(kubectl -n default describe volumesnapshot snap-1 2>&1 | tail -8)"
fi
finish
