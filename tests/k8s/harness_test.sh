#!/usr/bin/env bash
# Self-test of the loopback Kubernetes harness (lib.sh): builds or finds the
# tools, starts etcd + kube-apiserver (+ kube-controller-manager), and checks
# with the built kubectl what pillar will rely on. Last line:
#   k8s-harness: N passed, M failed
# Exit status is non-zero on any failure. The work dir is removed on success
# and kept (with the daemons' logs) on failure; K8S_HARNESS_KEEP=1 always keeps it.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

passed=0 failed=0
t_start=$(date +%s.%N)
ok()   { passed=$((passed + 1)); echo "ok   - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1${2:+: $2}"; }
# check NAME CMD...: CMD's exit status decides.
check() { local n=$1; shift; if "$@" >/dev/null; then ok "$n"; else fail "$n"; fi; }
finish() {
  echo "self-test wall time: $(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
  if (( failed == 0 )) && [[ -z ${K8S_HARNESS_KEEP:-} ]]; then
    rm -rf "$W"
  else
    echo "work dir kept: $W"
  fi
  echo "k8s-harness: $passed passed, $failed failed"
  (( failed == 0 ))
  exit
}

W=$(mktemp -d "${TMPDIR:-/tmp}/pillar-k8s-harness.XXXXXX")
kc() { k8s_kubectl "$@"; }

# ---- tools and control plane -------------------------------------------------
if k8s_tools; then ok "tools built or cached in $K8S_BIN"; else fail "tools"; finish; fi
if k8s_up "$W"; then ok "k8s_up"; else fail "k8s_up"; finish; fi

check "env file written" grep -q "^K8S_SERVER=https://127.0.0.1:" "$W/env"
[[ $(kc get --raw /readyz 2>&1) == ok ]] && ok "kubectl get --raw /readyz" || fail "kubectl get --raw /readyz"
sv=$(kc get --raw /version 2>/dev/null | grep -o '"gitVersion": *"[^"]*"' | grep -o 'v[0-9][^"]*')
[[ $sv == v1.37.2 ]] && ok "server version v1.37.2" || fail "server version" "got '$sv'"

# ---- namespace, CRD with status subresource ----------------------------------
NS=pillar-harness
check "create namespace" kc create namespace "$NS" -o name

kc apply -f - >/dev/null <<'EOF' && ok "apply CRD" || fail "apply CRD"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.harness.pillar.test
spec:
  group: harness.pillar.test
  scope: Cluster
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
          status:
            type: object
            properties:
              phase: {type: string}
EOF
check "CRD established" kc wait --for=condition=Established crd/widgets.harness.pillar.test --timeout=30s
kc create -f - >/dev/null <<'EOF' && ok "create Widget" || fail "create Widget"
apiVersion: harness.pillar.test/v1alpha1
kind: Widget
metadata: {name: w1}
spec: {size: 3}
EOF
[[ $(kc get wdg w1 -o jsonpath='{.spec.size}' 2>&1) == 3 ]] && ok "get Widget" || fail "get Widget"
kc patch widget w1 --subresource=status --type=merge -p '{"status":{"phase":"Ready"}}' >/dev/null 2>&1
got=$(kc get widget w1 -o jsonpath='{.status.phase}/{.metadata.generation}' 2>&1)
[[ $got == Ready/1 ]] && ok "status subresource write (generation unchanged)" || fail "status subresource" "got '$got'"
kc patch widget w1 --type=merge -p '{"status":{"phase":"Bogus"},"spec":{"size":4}}' >/dev/null 2>&1
got=$(kc get widget w1 -o jsonpath='{.status.phase}/{.metadata.generation}' 2>&1)
[[ $got == Ready/2 ]] && ok "main resource write ignores status, bumps generation" || fail "main resource write" "got '$got'"

# ---- ServiceAccount token bound to a Pod, TokenReview -------------------------
check "create ServiceAccount" kc -n "$NS" create serviceaccount pillar-node -o name
kc -n "$NS" create -f - >/dev/null <<'EOF' && ok "create Pod on node-a" || fail "create Pod on node-a"
apiVersion: v1
kind: Pod
metadata: {name: plugin-a}
spec:
  nodeName: node-a
  serviceAccountName: pillar-node
  containers:
  - {name: c, image: registry.invalid/pillar/none:0}
EOF

# review TOKEN OUTFILE [AUDIENCE]: TokenReview as the admin, JSON to OUTFILE.
review() {
  local aud=""
  [[ -n ${3:-} ]] && aud="  audiences: [\"$3\"]"
  kc create -o json -f - >"$2" 2>&1 <<EOF
apiVersion: authentication.k8s.io/v1
kind: TokenReview
spec:
  token: "$1"
$aud
EOF
}

tok=$(kc -n "$NS" create token pillar-node --bound-object-kind Pod --bound-object-name plugin-a \
  --audience pillar-test --duration 10m 2>"$W/token.err")
[[ -n $tok ]] && ok "create token bound to Pod" || fail "create token bound to Pod" "$(cat "$W/token.err")"
# summary FILE: "authenticated|username|node-name|pod-name|audiences|error" of a
# TokenReview answer (one python start per answer: it is slow under pyenv).
summary() {
  python3 - "$1" <<'PY' 2>/dev/null
import json, sys
try:
    st = json.load(open(sys.argv[1])).get("status", {})
except Exception as e:
    print("unparsable|||||%s" % e); sys.exit()
u = st.get("user", {}); x = u.get("extra", {})
print("|".join([str(st.get("authenticated", False)), u.get("username", ""),
                ",".join(x.get("authentication.kubernetes.io/node-name", [])),
                ",".join(x.get("authentication.kubernetes.io/pod-name", [])),
                ",".join(st.get("audiences", [])), st.get("error", "").replace("|", "/")]))
PY
}

review "$tok" "$W/tr-good.json" pillar-test
IFS='|' read -r authn user node pod auds err <<<"$(summary "$W/tr-good.json")"
[[ $authn == True ]] && ok "TokenReview: authenticated" || fail "TokenReview: authenticated" "$(head -c 600 "$W/tr-good.json")"
[[ $user == "system:serviceaccount:$NS:pillar-node" ]] && ok "TokenReview: username" || fail "TokenReview: username" "got '$user'"
[[ $node == node-a ]] && ok "TokenReview: extra node-name is node-a" ||
  fail "TokenReview: extra node-name" "got '$node'; answer: $(head -c 800 "$W/tr-good.json")"
[[ $pod == plugin-a ]] && ok "TokenReview: extra pod-name is plugin-a" || fail "TokenReview: extra pod-name" "got '$pod'"
[[ $auds == pillar-test ]] && ok "TokenReview: audiences" || fail "TokenReview: audiences" "got '$auds'"

# The apiserver's own audience is not pillar-test: a review without audiences fails.
review "$tok" "$W/tr-noaud.json"
IFS='|' read -r authn user node pod auds err <<<"$(summary "$W/tr-noaud.json")"
[[ $authn == False && -n $err ]] && ok "TokenReview without audiences: not authenticated" ||
  fail "TokenReview without audiences" "$(head -c 600 "$W/tr-noaud.json")"

tok_other=$(kc -n "$NS" create token pillar-node --bound-object-kind Pod --bound-object-name plugin-a \
  --audience some-other-audience --duration 10m 2>/dev/null)
review "$tok_other" "$W/tr-wrongaud.json" pillar-test
IFS='|' read -r authn user node pod auds err <<<"$(summary "$W/tr-wrongaud.json")"
[[ -n $tok_other && $authn == False && -n $err ]] && ok "wrong audience: not authenticated" ||
  fail "wrong audience" "$(head -c 600 "$W/tr-wrongaud.json")"

review "garbage.not.ajwt" "$W/tr-garbage.json" pillar-test
IFS='|' read -r authn user node pod auds err <<<"$(summary "$W/tr-garbage.json")"
[[ $authn == False ]] && ok "garbage token: not authenticated" || fail "garbage token" "$(head -c 600 "$W/tr-garbage.json")"

# ---- Lease: create, update, compare-and-swap -----------------------------------
kc -n "$NS" create -f - >/dev/null <<'EOF' && ok "create Lease" || fail "create Lease"
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: pillar-controller}
spec: {holderIdentity: controller-a, leaseDurationSeconds: 15}
EOF
kc -n "$NS" get lease pillar-controller -o json >"$W/lease-old.json" 2>&1
kc -n "$NS" patch lease pillar-controller --type=merge -p '{"spec":{"holderIdentity":"controller-b","leaseTransitions":1}}' >/dev/null 2>&1
got=$(kc -n "$NS" get lease pillar-controller -o jsonpath='{.spec.holderIdentity}/{.spec.leaseTransitions}' 2>&1)
[[ $got == controller-b/1 ]] && ok "update Lease" || fail "update Lease" "got '$got'"
out=$(kc replace -f "$W/lease-old.json" 2>&1)
[[ $? -ne 0 && $out == *"the object has been modified"* ]] &&
  ok "Lease replace with a stale resourceVersion is a Conflict" || fail "stale Lease replace" "$out"

# ---- a bound token dies with its Pod ---------------------------------------------
# The apiserver caches a successful token authentication for 10 s (fixed, not a
# flag), so the review may stay authenticated that long after the delete.
kc -n "$NS" delete pod plugin-a --grace-period=0 --force >/dev/null 2>&1
t_del=$SECONDS dead=""
while (( SECONDS - t_del < 25 )); do
  review "$tok" "$W/tr-afterdelete.json" pillar-test
  IFS='|' read -r authn user node pod auds err <<<"$(summary "$W/tr-afterdelete.json")"
  [[ $authn == False ]] && { dead=1; break; }
  sleep 0.5
done
[[ -n $dead ]] && ok "token of a deleted Pod: not authenticated (after ~$((SECONDS - t_del)) s)" ||
  fail "token of a deleted Pod still authenticated after 25 s"

# ---- kube-controller-manager ----------------------------------------------------
if k8s_start_controller_manager "$W"; then ok "kube-controller-manager healthy"; else fail "kube-controller-manager"; fi
# The serviceaccount controller makes "default" in every namespace.
sa_ok=""
for _ in $(seq 1 100); do kc -n "$NS" get sa default >/dev/null 2>&1 && { sa_ok=1; break; }; sleep 0.3; done
[[ -n $sa_ok ]] && ok "controller-manager: default ServiceAccount created" || fail "controller-manager: no default ServiceAccount"
# The PV binder binds a claim to a matching pre-made volume.
kc apply -f - >/dev/null <<EOF && ok "create PV and PVC" || fail "create PV and PVC"
apiVersion: v1
kind: PersistentVolume
metadata: {name: harness-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: harness
  persistentVolumeReclaimPolicy: Retain
  csi: {driver: pillar.test, volumeHandle: harness-vol}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: harness-pvc, namespace: $NS}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: harness
  resources: {requests: {storage: 1Gi}}
EOF
phase=""
for _ in $(seq 1 100); do
  phase=$(kc -n "$NS" get pvc harness-pvc -o jsonpath='{.status.phase}' 2>/dev/null)
  [[ $phase == Bound ]] && break
  sleep 0.3
done
[[ $phase == Bound ]] && ok "controller-manager: PVC bound to PV" || fail "controller-manager: PVC not bound" "phase '$phase'"

# ---- loopback only ----------------------------------------------------------------
pids=()
for n in etcd kube-apiserver kube-controller-manager; do pids+=("$(cat "$W/run/$n.pid" 2>/dev/null)"); done
listen=$(ss -Hltnp 2>/dev/null)
lo_ok=1 seen=0
for p in "${pids[@]}"; do
  lines=$(grep -E "pid=$p," <<<"$listen")
  [[ -n $lines ]] || { lo_ok=""; echo "  no listening socket found for pid $p"; continue; }
  seen=$((seen + 1))
  while read -r l; do
    addr=$(awk '{ print $4 }' <<<"$l")
    [[ $addr == 127.0.0.1:* ]] || { lo_ok=""; echo "  not loopback: $l"; }
  done <<<"$lines"
done
[[ -n $lo_ok && $seen -eq 3 ]] && ok "every listening socket is on 127.0.0.1" || fail "loopback only"

# ---- teardown -------------------------------------------------------------------
k8s_down "$W"
left=""
for p in "${pids[@]}"; do [[ -n $p ]] && _k8s_alive "$p" && left+=" $p"; done
[[ -z $left && -z $(ls "$W/run"/*.pid 2>/dev/null) ]] && ok "k8s_down: no process left" || fail "k8s_down left processes:$left"

finish
