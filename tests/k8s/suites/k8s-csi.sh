#!/usr/bin/env bash
# The control plane drives pillar, with real parts only: kube-apiserver, etcd
# and kube-controller-manager (PV binder, attach/detach and expand
# controllers) from tests/k8s/lib.sh; the real csi-provisioner, csi-attacher
# and csi-resizer, built from their Go modules (tests/k8s/build-csi-tools.sh);
# pillar-controller on the Kubernetes store beside them on one CSI socket;
# one pillar agent. No kubelet runs: a Pod is placed with spec.nodeName, and
# the node's CSINode and identity report stand in for what node-driver-
# registrar and pillar-node would send (NodeStage/NodePublish are the
# real-kernel guests' part, tests/e2e).
#   StorageClass + PVC -> PV Bound, pvst with its exportSpec, Reconciled
#   Pod on node-a -> VolumeAttachment -> ControllerPublishVolume -> node-a's
#     NQN in the target's ACL
#   PVC expanded -> ControllerExpandVolume -> backend volume and PV grown
#   seed 000: node-a's identity changes while published -> the ACL follows,
#     with the same VolumeAttachment (no new publish)
#   Pod deleted -> VolumeAttachment gone -> ACL entry gone; PVC deleted ->
#     export, backend volume, pvst and PV gone
#   auth: chap with a Secret -> the sidecars hand the key to CreateVolume and
#     ControllerPublishVolume: the target holds it, the store a digest only
# The agent serves its exports on a simulated configfs (a file pool on this
# host; no kernel target here): the output says so.
# Last line:  k8s-csi: N passed, M failed
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib.sh
source "$here/lib.sh"
# shellcheck source=../pillar.sh
source "$here/pillar.sh"

# shellcheck source=../suite.sh
source "$here/suite.sh"
suite_begin k8s-csi controller-a.log "csi-*.log" kube-controller-manager.log
suite_cleanup() {
  local s
  for s in csi-provisioner csi-attacher csi-resizer; do
    [[ -e $W/run/$s.pid ]] && _k8s_stop_one "$W/run/$s.pid"
  done
}

k8s_tools || { fail "tools"; finish; }
CSI_BIN=$("$here/build-csi-tools.sh" | tail -1) || { fail "CSI sidecars built (tests/k8s/build-csi-tools.sh)"; finish; }
for s in csi-provisioner csi-attacher csi-resizer; do
  [[ -x $CSI_BIN/$s ]] || { fail "$s in $CSI_BIN"; finish; }
done
k8s_up "$W" || { fail "k8s_up"; finish; }
k8s_start_controller_manager "$W" || { fail "kube-controller-manager"; finish; }

jp() { kubectl get "$1" -o jsonpath="$2" 2>/dev/null; }
eq() { [[ $(jp "$1" "$2") == "$3" ]]; }

# ---- pillar: agent, controller on the Kubernetes store ---------------------
echo "k8s-csi: the agent exports to a SIMULATED configfs under $W/configfs (no kernel target on this host)"
pillar_start_agent "$W" || { fail "agent"; finish; }
kubectl create namespace pillar >/dev/null
kubectl -n pillar create serviceaccount pillar-node >/dev/null
# The controller's own namespace is "pillar" (its kubeconfig context's, as a
# pod's is its namespace): its Lease lives there, its Events cannot.
cp "$K8S_KUBECONFIG" "$W/controller.kubeconfig"
kubectl --kubeconfig "$W/controller.kubeconfig" config set-context --current --namespace=pillar >/dev/null
pillar_start_controller "$W" controller-a --store "kube:$W/controller.kubeconfig" \
  --node-service-account pillar:pillar-node || { fail "pillar-controller"; finish; }
ok "pillar-controller leads on the Kubernetes store"

# ---- the real sidecars on the controller's socket ---------------------------
sock=$W/controller-a.sock
_k8s_start "$W" csi-provisioner "$CSI_BIN/csi-provisioner" --csi-address="$sock" --kubeconfig="$K8S_KUBECONFIG" \
  --leader-election=false --extra-create-metadata --timeout=60s --v=3
_k8s_start "$W" csi-attacher "$CSI_BIN/csi-attacher" --csi-address="$sock" --kubeconfig="$K8S_KUBECONFIG" \
  --leader-election=false --timeout=60s --v=3
_k8s_start "$W" csi-resizer "$CSI_BIN/csi-resizer" --csi-address="$sock" --kubeconfig="$K8S_KUBECONFIG" \
  --leader-election=false --timeout=60s --v=3
for s in csi-provisioner csi-attacher csi-resizer; do
  "$CSI_BIN/$s" --version 2>&1 | head -1 | sed "s/^/k8s-csi: /"
done

# node-a's plugin reports its identity with its pod's token (what pillar-node does).
TOKEN=$(pillar_node_a 30m) || { fail "CSIDriver, StorageClass, Node, CSINode and node-a's token"; finish; }
NQN1=nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000a1
NQN2=nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000a2
report() { # NQN IP
  pillar_reg "$W" controller-a --metadata "authorization=Bearer $TOKEN" RegisterNode \
    '{"identity":{"nodeId":"node-a","hostNqn":"'"$1"'","ipAddresses":["'"$2"'"]}}' >/dev/null
}
if report "$NQN1" 192.0.2.10; then ok "node-a reported its identity (TokenReview)"; else fail "node-a report"; fi

# ---- StorageClass + PVC -> PV Bound ---------------------------------------
t0=$(now_ms)
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim-1, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: pillar-nvmeof
  resources: {requests: {storage: 16Mi}}
YAML
if s=$(wait_for 120 eq pvc/claim-1 '{.status.phase}' Bound); then
  ok "PVC claim-1 Bound (${s} s): csi-provisioner called CreateVolume"
else
  fail "PVC Bound" "$(kubectl describe pvc claim-1 2>&1 | tail -5)"
  finish
fi
PV=$(jp pvc/claim-1 '{.spec.volumeName}')
VOL=$(jp "pv/$PV" '{.spec.csi.volumeHandle}')
if [[ -n $VOL && $(jp "pvst/$VOL" '{.status.exportSpec.aclEnabled}/{.status.exportSpec.bindAddress}') == true/127.0.0.1 ]]; then
  ok "pvst/$VOL recorded with its exportSpec (acl on, 127.0.0.1)"
else
  fail "pvst with exportSpec" "$(kubectl get pvst -o yaml 2>&1 | head -30)"
fi
cond() { jp "pvst/$VOL" '{.status.conditions[?(@.type=="ExportReconciled")].status}/{.status.conditions[?(@.type=="ExportReconciled")].reason}'; }
if wait_for 60 eq "pvst/$VOL" '{.status.conditions[?(@.type=="ExportReconciled")].reason}' Reconciled >/dev/null; then
  ok "ExportReconciled=True/Reconciled"
else
  fail "Reconciled" "$(cond)"
fi
# The transition is an Event about the PillarVolumeState, in "default" (the
# API server refuses an Event about a cluster-scoped object anywhere else).
reconciled_event() {
  [[ -n $(kubectl -n default get events -o name \
    --field-selector "involvedObject.kind=PillarVolumeState,involvedObject.name=$VOL,reason=Reconciled" 2>/dev/null) ]]
}
if wait_for 30 reconciled_event >/dev/null; then
  ok "Event Reconciled about pvst/$VOL in default"
else
  fail "Event Reconciled about pvst/$VOL" "$(kubectl get events -A 2>&1 | tail -5; grep 'event not recorded' "$W/logs/controller-a.log" | tail -2)"
fi
[[ -f $W/pool/$VOL.img ]] && ok "backend volume demo/$VOL exists" || fail "backend volume" "$(ls "$W/pool")"
subsys=$W/configfs/nvmet/subsystems/$(jp "pvst/$VOL" '{.status.exportInfo.targetID}')
[[ -d $subsys ]] && ok "nvmet subsystem exported" || fail "subsystem" "$subsys"
hosts() { ls "$subsys/allowed_hosts" 2>/dev/null | sort | tr '\n' ' '; }
[[ -z $(hosts) ]] && ok "ACL on and empty before any publish" || fail "empty ACL" "$(hosts)"

# ---- Pod on node-a -> VolumeAttachment -> ControllerPublishVolume -----------
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: app-1, namespace: default}
spec:
  nodeName: node-a
  containers: [{name: app, image: registry.invalid/pillar/app:0, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: claim-1}}]
YAML
va_attached() { [[ $(kubectl get volumeattachment -o jsonpath="{.items[?(@.spec.source.persistentVolumeName==\"$PV\")].status.attached}") == true ]]; }
if s=$(wait_for 120 va_attached); then
  ok "VolumeAttachment attached (${s} s): csi-attacher called ControllerPublishVolume"
  echo "figure: k8s-csi pod -> VolumeAttachment attached in $s s"
else
  fail "VolumeAttachment attached" "$(kubectl get volumeattachment -o yaml 2>&1 | tail -20)"
fi
VA=$(kubectl get volumeattachment -o jsonpath="{.items[?(@.spec.source.persistentVolumeName==\"$PV\")].metadata.name}")
VA_UID=$(jp "volumeattachment/$VA" '{.metadata.uid}')
[[ $(hosts) == "$NQN1 " ]] && ok "node-a's NQN is the target's ACL" || fail "ACL after publish" "$(hosts)"
[[ $(jp "pvst/$VOL" '{.status.publishedNodes[*].nodeID}') == node-a ]] && ok "pvst publishedNodes = [node-a]" ||
  fail "publishedNodes" "$(jp "pvst/$VOL" '{.status.publishedNodes}')"

# ---- expand -> ControllerExpandVolume --------------------------------------
kubectl patch pvc claim-1 --type=merge -p '{"spec":{"resources":{"requests":{"storage":"32Mi"}}}}' >/dev/null
if s=$(wait_for 120 eq "pv/$PV" '{.spec.capacity.storage}' 32Mi); then
  ok "PV grown to 32Mi (${s} s): csi-resizer called ControllerExpandVolume"
else
  fail "PV grown" "$(jp "pv/$PV" '{.spec.capacity.storage}') $(kubectl describe pvc claim-1 | tail -5)"
fi
size=$(stat -c %s "$W/pool/$VOL.img" 2>/dev/null)
((size == 32 * 1024 * 1024)) && ok "backend volume is 32 MiB" || fail "backend size" "$size"

# ---- seed 000 through Kubernetes objects: the node's identity changes -----
t0=$(now_ms)
report "$NQN2" 192.0.2.77 || fail "node-a re-reports"
acl_is() { [[ $(hosts) == "$1 " ]]; }
if s=$(wait_for 60 acl_is "$NQN2"); then
  ok "node-a's new NQN replaced the old one in the ACL (${s} s), with no new publish"
  echo "figure: k8s-csi ACL followed the node's new NQN in $s s"
else
  fail "ACL follows the new NQN" "$(hosts)"
fi
[[ $(jp "volumeattachment/$VA" '{.metadata.uid}') == "$VA_UID" ]] && ok "the same VolumeAttachment ($VA)" ||
  fail "VolumeAttachment unchanged"

# ---- Pod deleted -> detach; PVC deleted -> everything gone ----------------
kubectl delete pod app-1 --wait=false >/dev/null
# No kubelet confirms the pod's end: remove it the way a node's kubelet would.
kubectl delete pod app-1 --grace-period=0 --force >/dev/null 2>&1
if s=$(wait_for 120 bash -c "! '$K8S_BIN/kubectl' --kubeconfig '$K8S_KUBECONFIG' get volumeattachment '$VA' >/dev/null 2>&1"); then
  ok "VolumeAttachment gone (${s} s): csi-attacher called ControllerUnpublishVolume"
else
  fail "VolumeAttachment gone" "$(kubectl get volumeattachment "$VA" -o yaml 2>&1 | tail -15)"
fi
[[ -z $(hosts) ]] && ok "node-a's ACL entry removed" || fail "ACL after unpublish" "$(hosts)"
[[ -z $(jp "pvst/$VOL" '{.status.publishedNodes[*].nodeID}') ]] && ok "publishedNodes empty" || fail "publishedNodes after unpublish"
kubectl delete pvc claim-1 --wait=false >/dev/null
if s=$(wait_for 120 bash -c "! '$K8S_BIN/kubectl' --kubeconfig '$K8S_KUBECONFIG' get pv '$PV' >/dev/null 2>&1"); then
  ok "PV deleted (${s} s): csi-provisioner called DeleteVolume"
else
  fail "PV deleted" "$(kubectl get pv "$PV" -o yaml 2>&1 | tail -10)"
fi
if ! kubectl get pvst "$VOL" >/dev/null 2>&1; then ok "pvst/$VOL gone"; else fail "pvst gone"; fi
[[ ! -e $W/pool/$VOL.img ]] && ok "backend volume deleted" || fail "backend volume deleted"
[[ ! -e $subsys ]] && ok "export removed" || fail "export removed"

# ---- in-band authentication: keys from a Secret, through the real sidecars --
# csi-provisioner reads the class's Secret for CreateVolume, csi-attacher for
# ControllerPublishVolume; the store keeps a digest, the target the key.
KEY=$(python3 -c 'import base64, os, struct, zlib; k = os.urandom(32)
print("DHHC-1:00:" + base64.b64encode(k + struct.pack("<I", zlib.crc32(k))).decode() + ":")')
kubectl apply -f - >/dev/null 2>"$W/err" <<YAML || fail "Secret and chap StorageClass" "$(cat "$W/err")"
apiVersion: v1
kind: Secret
metadata: {name: nvme-chap, namespace: pillar}
stringData: {dhchapKey: "$KEY"}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: pillar-nvmeof-chap}
provisioner: pillar-csi.bhyoo.com
volumeBindingMode: Immediate
reclaimPolicy: Delete
parameters:
  {agent: storage-1, pool: demo, protocol: nvmeof-tcp, acl: "true", bindAddress: 127.0.0.1, auth: chap,
   csi.storage.k8s.io/provisioner-secret-name: nvme-chap, csi.storage.k8s.io/provisioner-secret-namespace: pillar,
   csi.storage.k8s.io/controller-publish-secret-name: nvme-chap, csi.storage.k8s.io/controller-publish-secret-namespace: pillar,
   csi.storage.k8s.io/node-stage-secret-name: nvme-chap, csi.storage.k8s.io/node-stage-secret-namespace: pillar}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim-chap, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: pillar-nvmeof-chap, resources: {requests: {storage: 16Mi}}}
YAML
if s=$(wait_for 120 eq pvc/claim-chap '{.status.phase}' Bound); then
  ok "PVC claim-chap Bound (${s} s): CreateVolume with the Secret's key"
  PV=$(jp pvc/claim-chap '{.spec.volumeName}')
  VOL=$(jp "pv/$PV" '{.spec.csi.volumeHandle}')
  spec=$(jp "pvst/$VOL" '{.status.exportSpec.auth} {.status.exportSpec.authDigest}')
  [[ $spec == "chap sha256:"* ]] && ok "pvst/$VOL records auth chap and a digest only ($spec)" || fail "exportSpec auth" "$spec"
  if kubectl get pvst "$VOL" -o json | grep -qF "${KEY:10:20}"; then fail "the key is not in the pvst"; else ok "the key is not in the pvst"; fi
  kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: app-chap, namespace: default}
spec:
  nodeName: node-a
  containers: [{name: app, image: registry.invalid/pillar/app:0, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: claim-chap}}]
YAML
  subsys=$W/configfs/nvmet/subsystems/$(jp "pvst/$VOL" '{.status.exportInfo.targetID}')
  if s=$(wait_for 120 va_attached); then
    ok "VolumeAttachment attached (${s} s): ControllerPublishVolume with the Secret"
  else
    fail "chap VolumeAttachment attached" "$(kubectl get volumeattachment -o yaml 2>&1 | tail -20)"
  fi
  [[ $(hosts) == "$NQN2 " ]] && ok "node-a's NQN is the chap volume's ACL" || fail "chap ACL" "$(hosts)"
  host_key=$(cat "$W/configfs/nvmet/hosts/$NQN2/dhchap_key" 2>/dev/null)
  [[ $host_key == "$KEY" ]] && ok "nvmet hosts/<node-a's NQN>/dhchap_key holds the Secret's key" ||
    fail "dhchap_key on the target" "${host_key:0:12}..."
  if grep -qF "${KEY:10:20}" "$W"/logs/*.log; then fail "the key is in no log"; else ok "the key is in no log"; fi
  kubectl delete pod app-chap --grace-period=0 --force >/dev/null 2>&1
  kubectl delete pvc claim-chap --wait=false >/dev/null
  if s=$(wait_for 120 bash -c "! '$K8S_BIN/kubectl' --kubeconfig '$K8S_KUBECONFIG' get pv '$PV' >/dev/null 2>&1"); then
    ok "chap volume detached and deleted (${s} s)"
  else
    fail "chap volume deleted" "$(kubectl get pv "$PV" -o yaml 2>&1 | tail -10)"
  fi
else
  fail "PVC claim-chap Bound" "$(kubectl describe pvc claim-chap 2>&1 | tail -5)"
fi
finish
