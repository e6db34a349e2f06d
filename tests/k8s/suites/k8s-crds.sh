#!/usr/bin/env bash
# pillar's CRDs (deploy/crds, generated from src/api) on a real kube-apiserver:
# accepted with server-side apply, `kubectl get pvst` prints the columns the
# runbooks read, and the schema refuses what the design forbids (an
# exportSpec without bindAddress, port or aclEnabled, a port out of range, an
# unknown protocol) while a status patch with test operations on uid and
# resourceVersion is a real compare-and-swap. Last line:
#   k8s-crds: N passed, M failed
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib.sh
source "$here/lib.sh"

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1${2:+: $2}"; }
finish() {
  echo "k8s-crds: $passed passed, $failed failed"
  ((failed == 0))
  exit
}
W=$(mktemp -d "${TMPDIR:-/tmp}/pillar-k8s-crds.XXXXXX")
kc() { k8s_kubectl "$@"; }

k8s_tools || { fail "tools"; finish; }
k8s_up "$W" || { fail "k8s_up"; finish; }

if kc apply --server-side --field-manager=pillar-test -f "$root/deploy/crds/" >"$W/apply.out" 2>&1; then
  ok "CRDs accepted by server-side apply"
else
  fail "CRDs accepted by server-side apply" "$(cat "$W/apply.out")"
  finish
fi
for crd in pillarvolumestates pillaragents pillarnodes pillarsnapshots; do
  if kc wait --for=condition=Established "crd/$crd.pillar-csi.bhyoo.com" --timeout=60s >/dev/null; then
    ok "$crd established"
  else
    fail "$crd established"
  fi
done

pvst() {  # pvst NAME: a volume without exportSpec, as before 0.2.0
  cat <<YAML
apiVersion: pillar-csi.bhyoo.com/v1alpha1
kind: PillarVolumeState
metadata:
  name: $1
spec:
  volumeID: $1
  agentRef: storage-1
  agentVolumeID: tank/$1
  protocol: nvmeof-tcp
  capacityBytes: 1073741824
  accessType: mount
  fsType: ext4
YAML
}
if pvst pvc-1 | kc create -f - >/dev/null 2>"$W/err"; then ok "pvst created"; else fail "pvst created" "$(cat "$W/err")"; fi
if kc get pvst pvc-1 >/dev/null 2>&1; then ok "short name pvst"; else fail "short name pvst"; fi

# status through the subresource, with the condition the printer columns read
status='{"status":{"publishedNodes":[{"nodeID":"node-a","revoking":false}],"publicationGeneration":1,
  "conditions":[{"type":"ExportReconciled","status":"False","reason":"ExportSpecMissing","message":"absent",
  "lastTransitionTime":"2026-12-03T08:00:00Z","observedGeneration":1}]}}'
if kc patch pvst pvc-1 --subresource=status --type=merge -p "$status" >/dev/null 2>"$W/err"; then
  ok "status written through the status subresource"
else
  fail "status written through the status subresource" "$(cat "$W/err")"
fi
table=$(kc get pvst pvc-1 2>&1)
echo "$table"
for col in AGENT PROTOCOL PUBLISHED RECONCILED REASON AGE; do
  if head -1 <<<"$table" | grep -qw "$col"; then ok "column $col"; else fail "column $col"; fi
done
if tail -1 <<<"$table" | grep -q "storage-1.*nvmeof-tcp.*node-a.*False.*ExportSpecMissing"; then
  ok "row shows agent, protocol, node, False, ExportSpecMissing"
else
  fail "row content" "$(tail -1 <<<"$table")"
fi

# the schema refuses what the design forbids
refused() {  # refused NAME JSON-PATCH
  if kc patch pvst pvc-1 --subresource=status --type=merge -p "$2" >"$W/out" 2>&1; then
    fail "refused: $1" "accepted"
  else
    ok "refused: $1"
  fi
}
refused "exportSpec without aclEnabled" '{"status":{"exportSpec":{"bindAddress":"10.0.0.5","port":4420}}}'
refused "exportSpec with empty bindAddress" '{"status":{"exportSpec":{"bindAddress":"","port":4420,"aclEnabled":true}}}'
refused "exportSpec port 70000" '{"status":{"exportSpec":{"bindAddress":"10.0.0.5","port":70000,"aclEnabled":true}}}'
refused "exportSpec aclEnabled as a string" '{"status":{"exportSpec":{"bindAddress":"10.0.0.5","port":4420,"aclEnabled":"true"}}}'
refused "condition status Maybe" '{"status":{"conditions":[{"type":"ExportReconciled","status":"Maybe"}]}}'
if pvst pvc-2 | sed 's/nvmeof-tcp/fc/' | kc create -f - >/dev/null 2>&1; then
  fail "refused: protocol fc"
else
  ok "refused: protocol fc"
fi
if [[ $(kc get pvst pvc-1 -o jsonpath='{.status.exportSpec}') == "" ]]; then
  ok "nothing refused was half-applied"
else
  fail "nothing refused was half-applied"
fi

# the runbook's CAS: test operations on uid and resourceVersion
uid=$(kc get pvst pvc-1 -o jsonpath='{.metadata.uid}')
rv=$(kc get pvst pvc-1 -o jsonpath='{.metadata.resourceVersion}')
stale=$((rv - 1))
patch() {
  printf '[{"op":"test","path":"/metadata/uid","value":"%s"},{"op":"test","path":"/metadata/resourceVersion","value":"%s"},{"op":"add","path":"/status/exportSpec","value":{"bindAddress":"10.0.0.5","port":4420,"aclEnabled":true}}]' "$1" "$2"
}
if kc patch pvst pvc-1 --subresource=status --type=json -p "$(patch "$uid" "$stale")" >/dev/null 2>&1; then
  fail "a stale resourceVersion is rejected"
else
  ok "a stale resourceVersion is rejected"
fi
if [[ $(kc get pvst pvc-1 -o jsonpath='{.status.exportSpec}') == "" ]]; then
  ok "the rejected patch changed nothing"
else
  fail "the rejected patch changed nothing"
fi
if kc patch pvst pvc-1 --subresource=status --type=json -p "$(patch "$uid" "$rv")" >/dev/null 2>"$W/err"; then
  ok "the pinned patch lands"
else
  fail "the pinned patch lands" "$(cat "$W/err")"
fi
if [[ $(kc get pvst pvc-1 -o jsonpath='{.status.exportSpec.aclEnabled}') == true ]]; then
  ok "exportSpec recorded"
else
  fail "exportSpec recorded"
fi

agent='{"apiVersion":"pillar-csi.bhyoo.com/v1alpha1","kind":"PillarAgent","metadata":{"name":"storage-1"},"spec":{"address":"10.0.0.5"}}'
if kc create -f - <<<"$agent" >/dev/null 2>&1; then fail "refused: PillarAgent without port"; else ok "refused: PillarAgent without port"; fi

k8s_down "$W"
rm -rf "$W"
finish
