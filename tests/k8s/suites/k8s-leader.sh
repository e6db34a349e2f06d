#!/usr/bin/env bash
# Two pillar-controller replicas on the Kubernetes store, against a real
# kube-apiserver and etcd:
#   - the first installs pillar's CRDs (none are applied beforehand)
#   - one Lease, one leader: the other replica answers CSI Probe with
#     ready=false and refuses mutations, serves no registry and reconciles
#     nothing while the leader lives; a real csi-attacher beside it waits
#     (past its 30 s connect deadline) without taking its lease
#   - the leader is killed (SIGKILL, as a node loss would): the other takes
#     the Lease after the lease duration and repairs what the storage node
#     lost meanwhile, with no restart of anything (failover time reported)
#   - a clean stop (SIGTERM) releases the Lease: the next replica leads at once
#   - Events on the PillarVolumeState for its ExportReconciled transitions
# Last line:  k8s-leader: N passed, M failed
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../lib.sh
source "$here/lib.sh"
# shellcheck source=../pillar.sh
source "$here/pillar.sh"

# shellcheck source=../suite.sh
source "$here/suite.sh"
suite_begin k8s-leader "controller-*.log" pillar-agent.log

k8s_tools || { fail "tools"; finish; }
k8s_up "$W" || { fail "k8s_up"; finish; }

# Fast timings so the test is short; the defaults are 15/10/2 s.
LEASE=(--leader-election-lease-duration 6 --leader-election-renew-deadline 4
  --leader-election-retry-period 1)
controller() { # NAME: launches replica NAME on the Kubernetes store
  pillar_launch_controller "$W" "$1" --store "kube:$K8S_KUBECONFIG" \
    --leader-election-identity "$1" "${LEASE[@]}"
}
holder() { kubectl -n default get lease pillar-csi-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
condition() {
  kubectl get pvst "$1" -o jsonpath='{.status.conditions[?(@.type=="ExportReconciled")].status}/{.status.conditions[?(@.type=="ExportReconciled")].reason}' 2>/dev/null
}
is() { [[ $(condition "$1") == "$2" ]]; }
create_volume() { # CONTROLLER NAME
  pillar_csi "$W" "$1" CreateVolume '{"name":"'"$2"'","capacityRange":{"requiredBytes":"16777216"},
    "volumeCapabilities":[{"mount":{"fsType":"ext4"},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}],
    "parameters":{"agent":"storage-1","pool":"demo","protocol":"nvmeof-tcp","bindAddress":"127.0.0.1","acl":"false"}}' 2>&1
}
events_of() { # NAME REASON: how many Events say REASON about pvst NAME
  kubectl get events -A --field-selector "involvedObject.kind=PillarVolumeState,involvedObject.name=$1,reason=$2" \
    -o name 2>/dev/null | wc -l
}
has_events() { (($(events_of "$1" "$2") > 0)); }

pillar_start_agent "$W" || { fail "agent"; finish; }
controller controller-a
if _pillar_wait_file "$W/controller-a.port" 120; then
  ok "controller-a leads and serves"
else
  fail "controller-a ready" "$(tail -5 "$W/logs/controller-a.log")"
  finish
fi
n=0
for crd in pillarvolumestates pillaragents pillarnodes pillarsnapshots; do
  [[ $(kubectl get crd "$crd.pillar-csi.bhyoo.com" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}') == True ]] && n=$((n + 1))
done
if ((n == 4)); then ok "the controller installed pillar's four CRDs"; else fail "CRDs installed" "$n of 4 Established"; fi
if [[ $(holder) == controller-a ]]; then ok "the Lease names controller-a"; else fail "Lease holder" "$(holder)"; fi

controller controller-b
# The real csi-attacher beside the standby, as in the chart's pod: it must
# neither give up (it does on a socket absent for 30 s) nor take its lease.
CSI_BIN=$("$here/build-csi-tools.sh" | tail -1) || fail "CSI sidecars built"
attacher_t0=$SECONDS
_k8s_start "$W" csi-attacher-b "$CSI_BIN/csi-attacher" --csi-address="$W/controller-b.sock" \
  --kubeconfig="$K8S_KUBECONFIG" --leader-election --leader-election-namespace=default --timeout=30s
suite_cleanup() { [[ -e $W/run/csi-attacher-b.pid ]] && _k8s_stop_one "$W/run/csi-attacher-b.pid"; }
attacher_lease() { kubectl -n default get lease -o name 2>/dev/null | grep -c external-attacher; }
sleep 4
if [[ ! -e $W/controller-b.port ]] && kill -0 "$(cat "$W/run/controller-b.pid")" 2>/dev/null &&
  grep -q "waiting for leadership" "$W/logs/controller-b.log"; then
  ok "controller-b waits: no registry, no reconciler while controller-a leads"
else
  fail "controller-b waits" "$(tail -5 "$W/logs/controller-b.log")"
fi
probe=$(pillar_csi "$W" controller-b Probe '{}' 2>&1)
if [[ $probe == *'"ready": false'* || $probe == *'"ready":false'* ]]; then
  ok "controller-b's CSI socket answers Probe: ready=false"
else
  fail "standby Probe" "$probe"
fi
out=$(create_volume controller-b pvc-standby)
if [[ $out == UNAVAILABLE*leader* ]] && ! kubectl get pvst pvc-standby >/dev/null 2>&1; then
  ok "controller-b refuses CreateVolume: UNAVAILABLE, nothing recorded"
else
  fail "standby refuses mutations" "$out"
fi
if [[ $(holder) == controller-a ]]; then ok "the Lease still names controller-a"; else fail "Lease holder" "$(holder)"; fi

if out=$(create_volume controller-a pvc-l1) && s=$(wait_for 60 is pvc-l1 True/Reconciled); then
  ok "a volume through the leader -> Reconciled (${s} s)"
else
  fail "volume through the leader" "$out $(condition pvc-l1)"
fi
if wait_for 20 has_events pvc-l1 Reconciled >/dev/null; then
  ok "Event Reconciled on pvst/pvc-l1"
else
  fail "Event Reconciled" "$(kubectl get events -A 2>&1 | tail -5)"
fi
if ! grep -q '"leading"' "$W/logs/controller-b.log"; then
  ok "controller-b did not lead (and so reconciled nothing)"
else
  fail "controller-b reconciled while not leading"
fi

# The storage node goes away: AgentUnavailable, as an Event too.
pillar_stop_agent "$W"
if s=$(wait_for 60 is pvc-l1 False/AgentUnavailable); then
  ok "agent gone -> False/AgentUnavailable (${s} s)"
else
  fail "AgentUnavailable" "$(condition pvc-l1)"
fi
if wait_for 20 has_events pvc-l1 AgentUnavailable >/dev/null &&
  [[ $(kubectl get events -A --field-selector involvedObject.name=pvc-l1,reason=AgentUnavailable -o jsonpath='{.items[0].type}') == Warning ]]; then
  ok "Event AgentUnavailable (Warning) on pvst/pvc-l1"
else
  fail "Event AgentUnavailable"
fi
if kubectl describe pvst pvc-l1 2>&1 | grep -A8 '^Events:' | grep -q 'Warning.*AgentUnavailable'; then
  ok "kubectl describe pvst pvc-l1 lists the Events"
else
  fail "kubectl describe shows Events" "$(kubectl describe pvst pvc-l1 2>&1 | tail -8)"
fi

# Past the sidecars' 30 s connect deadline: still waiting, no lease taken.
while ((SECONDS - attacher_t0 < 35)); do sleep 1; done
if kill -0 "$(cat "$W/run/csi-attacher-b.pid")" 2>/dev/null && (($(attacher_lease) == 0)); then
  ok "csi-attacher beside the standby waits in its probe loop after $((SECONDS - attacher_t0)) s, no lease taken"
else
  fail "csi-attacher beside the standby" "$(tail -3 "$W/logs/csi-attacher-b.log")"
fi

# The leader dies while the storage node is down and loses its target state.
rm -rf "$W/configfs"
t0=$(now_ms)
pillar_kill "$W" controller-a KILL
pillar_start_agent "$W" || { fail "agent restarted"; finish; }
if _pillar_wait_file "$W/controller-b.port" 60; then
  took=$(since "$t0")
  ok "controller-b took over after controller-a was killed (${took} s; lease duration 6 s)"
  echo "figure: k8s leader failover after SIGKILL in $took s"
else
  fail "controller-b takes over" "$(tail -5 "$W/logs/controller-b.log")"
  finish
fi
if [[ $(holder) == controller-b ]]; then ok "the Lease names controller-b"; else fail "Lease holder" "$(holder)"; fi
has_attacher_lease() { (($(attacher_lease) > 0)); }
if s=$(wait_for 60 has_attacher_lease) && kill -0 "$(cat "$W/run/csi-attacher-b.pid")" 2>/dev/null; then
  ok "the same csi-attacher process went on once controller-b led, and took its lease (${s} s)"
else
  fail "csi-attacher after failover" "$(tail -3 "$W/logs/csi-attacher-b.log")"
fi
subsys=$W/configfs/nvmet/subsystems/$(kubectl get pvst pvc-l1 -o jsonpath='{.status.exportInfo.targetID}')
if s=$(wait_for 60 is pvc-l1 True/Reconciled) && [[ -d $subsys ]]; then
  ok "the new leader rebuilt the lost export -> Reconciled (${s} s after it led)"
else
  fail "new leader repairs" "$(condition pvc-l1)"
fi
if out=$(create_volume controller-b pvc-l2) && wait_for 60 is pvc-l2 True/Reconciled >/dev/null; then
  ok "the new leader answers CSI"
else
  fail "CSI on the new leader" "$out"
fi

# A clean stop gives the Lease up: the next replica leads without waiting it out.
controller controller-c
sleep 2
t0=$(now_ms)
pillar_kill "$W" controller-b TERM
released() { [[ -z $(holder) || $(holder) == controller-c ]]; }
if s=$(wait_for 3 released); then  # well inside the 6 s lease: an unreleased one would still be held
  ok "SIGTERM released the Lease (${s} s)"
else
  fail "Lease released" "holder $(holder)"
fi
if _pillar_wait_file "$W/controller-c.port" 30; then
  took=$(since "$t0")
  ok "controller-c leads ${took} s after controller-b's SIGTERM"
  echo "figure: k8s leader handover after SIGTERM in $took s"
else
  fail "controller-c leads" "$(tail -5 "$W/logs/controller-c.log")"
fi
finish
