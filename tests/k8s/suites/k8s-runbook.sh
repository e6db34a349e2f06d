#!/usr/bin/env bash
# Seed 001 ("Recover a volume stuck at ExportSpecMissing") as a test, with
# the real kubectl and jq against a real API server, and pillar-controller
# on the Kubernetes store:
#   - a volume provisioned through CSI, bound to a PV and PVC, whose record is
#     then made as old volumes are (no status.exportSpec), and whose storage
#     node loses its target state: ExportReconciled=False/ExportSpecMissing,
#     and nothing is guessed
#   - the runbook's own commands, steps 1-5: find, snapshot uid and
#     resourceVersion, back up and verify, patch status with test operations,
#     wait for Reconciled
#   - the negative path: a patch pinned to a stale resourceVersion is refused
#     and changes nothing
#   - pillarctl on the same store: get/describe, and its repair of a second
#     volume (the same patch, pinned the same way)
# Last line:  k8s-runbook: N passed, M failed
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib.sh
source "$here/lib.sh"
# shellcheck source=../pillar.sh
source "$here/pillar.sh"

# shellcheck source=../suite.sh
source "$here/suite.sh"
suite_begin k8s-runbook controller-a.log pillar-agent.log
command -v jq >/dev/null || { fail "jq is installed (scripts/install-deps.sh)"; finish; }

k8s_tools || { fail "tools"; finish; }
k8s_up "$W" || { fail "k8s_up"; finish; }
k8s_start_controller_manager "$W" || { fail "kube-controller-manager"; finish; }
export KUBECONFIG=$K8S_KUBECONFIG
kubectl() { "$K8S_BIN/kubectl" "$@"; }
k8s_kubectl apply --server-side -f "$root/deploy/crds/" >/dev/null &&
  k8s_kubectl wait --for=condition=Established --timeout=60s crd --all >/dev/null ||
  { fail "pillar's CRDs"; finish; }

pillar_start_agent "$W" || { fail "agent"; finish; }
pillar_start_controller "$W" controller-a --store "kube:$K8S_KUBECONFIG" ||
  { fail "controller on the Kubernetes store"; finish; }
ok "controller serving on the Kubernetes store"

condition() {
  kubectl get pvst "$1" -o jsonpath='{.status.conditions[?(@.type=="ExportReconciled")].status}/{.status.conditions[?(@.type=="ExportReconciled")].reason}'
}
is() { [[ $(condition "$1") == "$2" ]]; }

# A volume through CSI, then a PV and a bound PVC for it, as the provisioner makes them.
provision() {
  local vol=$1 out
  out=$(pillar_csi "$W" controller-a CreateVolume '{"name":"'"$vol"'","capacityRange":{"requiredBytes":"16777216"},
    "volumeCapabilities":[{"mount":{"fsType":"ext4"},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}],
    "parameters":{"agent":"storage-1","pool":"demo","protocol":"nvmeof-tcp","bindAddress":"127.0.0.1","acl":"true"}}') ||
    { echo "$out"; return 1; }
  local address port
  address=$(jq -r '.volume.volumeContext.address' <<<"$out")
  port=$(jq -r '.volume.volumeContext.port' <<<"$out")
  kubectl apply -f - >/dev/null <<YAML || return 1
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-$vol}
spec:
  capacity: {storage: 16Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: pillar-nvmeof
  claimRef: {namespace: default, name: claim-$vol}
  csi:
    driver: pillar-csi.bhyoo.com
    volumeHandle: $vol
    fsType: ext4
    volumeAttributes: {address: "$address", port: "$port", protocol: nvmeof-tcp}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim-$vol, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: pillar-nvmeof
  volumeName: pv-$vol
  resources: {requests: {storage: 16Mi}}
YAML
  wait_for 60 bash -c "[[ \$('$K8S_BIN/kubectl' get pvc claim-$vol -o jsonpath='{.status.phase}') == Bound ]]" >/dev/null
}

for vol in pvc-old-1 pvc-old-2 pvc-old-3; do
  if out=$(provision "$vol"); then ok "$vol provisioned, PV and PVC bound"; else fail "$vol provisioned" "$out"; finish; fi
done
for vol in pvc-old-1 pvc-old-2 pvc-old-3; do
  wait_for 60 is "$vol" True/Reconciled >/dev/null || fail "$vol Reconciled" "$(condition "$vol")"
done

# Made old: no exportSpec, as volumes provisioned before 0.2.0 are.
for vol in pvc-old-1 pvc-old-2 pvc-old-3; do
  kubectl patch pvst "$vol" --subresource=status --type=json \
    -p '[{"op":"remove","path":"/status/exportSpec"}]' >/dev/null || fail "remove exportSpec of $vol"
done
# The storage node loses its target state.
pillar_stop_agent "$W"
rm -rf "$W/configfs"
pillar_start_agent "$W" || { fail "agent restarted"; finish; }
for vol in pvc-old-1 pvc-old-2 pvc-old-3; do
  if s=$(wait_for 60 is "$vol" False/ExportSpecMissing); then
    ok "$vol: ExportReconciled=False/ExportSpecMissing after the target state was lost (${s} s)"
  else
    fail "$vol: ExportSpecMissing" "$(condition "$vol")"
  fi
done
subsys() { echo "$W/configfs/nvmet/subsystems/$(kubectl get pvst "$1" -o jsonpath='{.status.exportInfo.targetID}')"; }
if [[ ! -e $(subsys pvc-old-1) ]]; then ok "nothing guessed: no export re-created"; else fail "an export was re-created without a record"; fi

# ---- the runbook, as written (seed 001), for pvc-old-1 ---------------------
CTX=$(kubectl config current-context)
# 1. Find affected volumes and pin the context
affected=$(kubectl --context "$CTX" get pvst -o json | jq -r '
  .items[]
  | select(.status.exportSpec == null)
  | select([.status.conditions[]? | select(.type=="ExportReconciled" and .reason=="ExportSpecMissing")] | length > 0)
  | .metadata.name' | sort | tr '\n' ' ')
if [[ $affected == "pvc-old-1 pvc-old-2 pvc-old-3 " ]]; then ok "step 1: the affected volumes are listed"; else fail "step 1" "$affected"; fi
PVST=pvc-old-1
PVS_JSON=$(kubectl --context "$CTX" get pvst "$PVST" -o json)
PVS_UID=$(jq -r '.metadata.uid' <<<"$PVS_JSON")
PVS_RV=$(jq -r '.metadata.resourceVersion' <<<"$PVS_JSON")
VID=$(jq -r '.spec.volumeID' <<<"$PVS_JSON")
PV_JSON=$(kubectl --context "$CTX" get pv -o json)
if PV=$(jq -r --arg vid "$VID" '[.items[]
     | select(.spec.csi.driver=="pillar-csi.bhyoo.com" and .spec.csi.volumeHandle==$vid)]
     | if length == 1 then .[0].metadata.name
       else error("PV identity ambiguous: " + (length|tostring) + " matches") end' <<<"$PV_JSON"); then
  ok "step 1: exactly one PV for the volume handle ($PV)"
else
  fail "step 1: one PV"
fi
read -r CLAIM_NS CLAIM_NAME CLAIM_UID < <(jq -r --arg pv "$PV" '
     .items[] | select(.metadata.name==$pv)
     | "\(.spec.claimRef.namespace) \(.spec.claimRef.name) \(.spec.claimRef.uid)"' <<<"$PV_JSON")
PVC_JSON=$(kubectl --context "$CTX" get pvc "$CLAIM_NAME" -n "$CLAIM_NS" -o json)

# 2. Back up the snapshots and verify the identity chain
mkdir -p "$W/pvs-recovery-$PVST" && cd "$W/pvs-recovery-$PVST" || finish
jq . <<<"$PVS_JSON" >pvst-backup.json
jq --arg pv "$PV" '.items[] | select(.metadata.name==$pv)' <<<"$PV_JSON" >pv-backup.json
jq . <<<"$PVC_JSON" >pvc-backup.json
if jq -e --arg uid "$PVS_UID" --arg vid "$VID" 'select(
    .metadata.uid == $uid and .spec.volumeID == $vid
    and .status.exportSpec == null
    and .metadata.deletionTimestamp == null and .status.deleting != true)' pvst-backup.json >/dev/null &&
  jq -e --arg pv "$PV" --arg vid "$VID" --arg claim "$CLAIM_UID" 'select(
    .metadata.name == $pv and .spec.csi.driver=="pillar-csi.bhyoo.com"
    and .spec.csi.volumeHandle == $vid and .spec.claimRef.uid == $claim)' pv-backup.json >/dev/null &&
  jq -e --arg pv "$PV" --arg uid "$CLAIM_UID" 'select(
    .metadata.uid == $uid and .status.phase == "Bound" and .spec.volumeName == $pv)' pvc-backup.json >/dev/null; then
  ok "step 2: identity chain pvst -> PV -> PVC verified in both directions"
else
  fail "step 2: identity chain"
fi
if [[ $(jq -r '.spec.agentVolumeID, .spec.agentRef' pvst-backup.json | tr '\n' ' ') == "demo/pvc-old-1 storage-1 " &&
  -e $W/pool/pvc-old-1.img ]]; then
  ok "step 2: the backend volume is where the record says"
else
  fail "step 2: backend volume"
fi

# 3. Decide the export record (from the PV's volumeAttributes: the provisioning-time evidence)
BIND_ADDRESS=$(kubectl --context "$CTX" get pv "$PV" -o jsonpath='{.spec.csi.volumeAttributes.address}')
PORT=$(kubectl --context "$CTX" get pv "$PV" -o jsonpath='{.spec.csi.volumeAttributes.port}')
ACL_ENABLED=true # the StorageClass of these volumes had acl=true (provision above)
case "$ACL_ENABLED" in true | false) ;; *) fail "step 3: ACL_ENABLED" ;; esac
case "$PORT" in '' | *[!0-9]*) fail "step 3: PORT" "$PORT" ;; esac

# The negative path first: pinned to a resourceVersion that is no longer the object's.
STALE_JSON=$(kubectl --context "$CTX" get pvst pvc-old-2 -o json)
STALE_UID=$(jq -r '.metadata.uid' <<<"$STALE_JSON")
STALE_RV=$(jq -r '.metadata.resourceVersion' <<<"$STALE_JSON")
# Someone writes after the snapshot (the controller, another operator).
kubectl annotate pvst pvc-old-2 pillar-test/touched=1 --overwrite >/dev/null
AFTER_RV=$(kubectl get pvst pvc-old-2 -o jsonpath='{.metadata.resourceVersion}')
if out=$(kubectl --context "$CTX" patch pvst pvc-old-2 --subresource=status --type=json -p "$(jq -cn \
  --arg uid "$STALE_UID" --arg rv "$STALE_RV" \
  --arg bind "$BIND_ADDRESS" --argjson port "$PORT" --argjson acl "$ACL_ENABLED" '[
    {op:"test", path:"/metadata/uid",            value:$uid},
    {op:"test", path:"/metadata/resourceVersion", value:$rv},
    {op:"add",  path:"/status/exportSpec",
     value:{bindAddress:$bind, port:$port, aclEnabled:$acl}}
  ]')" 2>&1); then
  fail "stale patch refused" "it was accepted: $out"
else
  ok "stale patch refused: $(head -1 <<<"$out" | cut -c1-120)"
fi
if [[ $(kubectl get pvst pvc-old-2 -o jsonpath='{.metadata.resourceVersion}') == "$AFTER_RV" &&
  -z $(kubectl get pvst pvc-old-2 -o jsonpath='{.status.exportSpec}') ]]; then
  ok "the refused patch changed nothing"
else
  fail "the refused patch changed nothing"
fi

# 4. Patch the status, pinned to the snapshot
if out=$(kubectl --context "$CTX" patch pvst "$PVST" --subresource=status --type=json -p "$(jq -cn \
  --arg uid "$PVS_UID" --arg rv "$PVS_RV" \
  --arg bind "$BIND_ADDRESS" --argjson port "$PORT" --argjson acl "$ACL_ENABLED" '[
    {op:"test", path:"/metadata/uid",            value:$uid},
    {op:"test", path:"/metadata/resourceVersion", value:$rv},
    {op:"add",  path:"/status/exportSpec",
     value:{bindAddress:$bind, port:$port, aclEnabled:$acl}}
  ]')" 2>&1); then
  ok "step 4: status patched, pinned to uid $PVS_UID and resourceVersion $PVS_RV"
else
  fail "step 4: patch" "$out"
fi

# 5. Wait for convergence
t0=$SECONDS
if kubectl --context "$CTX" wait pvst/"$PVST" \
  --for=jsonpath='{.status.conditions[?(@.type=="ExportReconciled")].status}'=True --timeout=60s >/dev/null; then
  ok "step 5: ExportReconciled=True"
  echo "figure: runbook patch -> ExportReconciled=True in $((SECONDS - t0)) s"
else
  fail "step 5: kubectl wait" "$(condition "$PVST")"
fi
reason=$(kubectl --context "$CTX" get pvst "$PVST" \
  -o jsonpath='{.status.conditions[?(@.type=="ExportReconciled")].reason}')
if [[ $reason == Reconciled ]]; then ok "step 5: reason Reconciled"; else fail "step 5: reason" "$reason"; fi
if [[ -d $(subsys "$PVST") && $(cat "$(subsys "$PVST")/attr_allow_any_host") == 0 ]]; then
  ok "the export is back, ACL on, as decided"
else
  fail "the export is back, ACL on"
fi
cd "$W" || finish
if [[ $(condition pvc-old-2) == False/ExportSpecMissing ]]; then
  ok "the other volumes stay at ExportSpecMissing: one repair says nothing about another"
else
  fail "pvc-old-2 untouched" "$(condition pvc-old-2)"
fi

# ---- pillarctl on the same Kubernetes store -------------------------------
if pillar_ctl --kubeconfig "$K8S_KUBECONFIG" get volumes >"$W/ctl-get.out" 2>&1 &&
  grep -q pvc-old-3 "$W/ctl-get.out"; then
  ok "pillarctl get volumes on the Kubernetes store"
else
  fail "pillarctl get volumes" "$(cat "$W/ctl-get.out")"
fi
RV3=$(kubectl get pvst pvc-old-3 -o jsonpath='{.metadata.resourceVersion}')
UID3=$(kubectl get pvst pvc-old-3 -o jsonpath='{.metadata.uid}')
if pillar_ctl --kubeconfig "$K8S_KUBECONFIG" repair export-spec pvc-old-3 --bind-address "$BIND_ADDRESS" \
  --port "$PORT" --acl-enabled true --expect-uid "$UID3" --expect-resource-version "${RV3}0" \
  --backup-dir "$W/ctl-backup-refused" >"$W/ctl-refused.out" 2>&1; then
  fail "pillarctl repair pinned to another resourceVersion is refused"
elif [[ -z $(kubectl get pvst pvc-old-3 -o jsonpath='{.status.exportSpec}') ]]; then
  ok "pillarctl repair pinned to another resourceVersion is refused and writes nothing"
else
  fail "pillarctl refused repair wrote something"
fi
if pillar_ctl --kubeconfig "$K8S_KUBECONFIG" repair export-spec pvc-old-3 --bind-address "$BIND_ADDRESS" \
  --port "$PORT" --acl-enabled true --expect-uid "$UID3" --expect-resource-version "$RV3" \
  --backup-dir "$W/ctl-backup" --timeout 60 >"$W/ctl-repair.out" 2>&1 && is pvc-old-3 True/Reconciled; then
  ok "pillarctl repair export-spec on the Kubernetes store -> Reconciled"
else
  fail "pillarctl repair" "$(cat "$W/ctl-repair.out")"
fi
finish
