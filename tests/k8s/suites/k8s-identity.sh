#!/usr/bin/env bash
# Node identity bound to the Kubernetes node, against a real kube-apiserver:
# pillar-controller on the Kubernetes store reviews every node report's
# projected ServiceAccount token (TokenReview) and accepts a report only for
# the node the token's pod is bound to. The tokens are real: TokenRequest for
# the node plugin's ServiceAccount, bound to Pods scheduled (nodeName) on
# node-a and node-b.
#   - node-a reports itself: PillarNode node-a recorded
#   - node-a's token reporting node-b (the impostor of the security issue):
#     PERMISSION_DENIED, node-b's record byte-for-byte unchanged; reading
#     node-b's identity with node-a's token: PERMISSION_DENIED
#   - no token, a token for another audience, a garbage token:
#     UNAUTHENTICATED; another ServiceAccount's token: PERMISSION_DENIED;
#     none of them writes anything
# Last line:  k8s-identity: N passed, M failed
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../lib.sh
source "$here/lib.sh"
# shellcheck source=../pillar.sh
source "$here/pillar.sh"

# shellcheck source=../suite.sh
source "$here/suite.sh"
suite_begin k8s-identity controller-a.log

k8s_tools || { fail "tools"; finish; }
k8s_up "$W" || { fail "k8s_up"; finish; }

kubectl create namespace pillar >/dev/null
kubectl -n pillar create serviceaccount pillar-node >/dev/null
kubectl -n pillar create serviceaccount other >/dev/null
for n in a b; do
  kubectl -n pillar apply -f - >/dev/null <<YAML || fail "pod plugin-$n"
apiVersion: v1
kind: Pod
metadata: {name: plugin-$n}
spec:
  nodeName: node-$n
  serviceAccountName: pillar-node
  containers: [{name: c, image: registry.invalid/pillar/none:0}]
YAML
done
kubectl -n pillar apply -f - >/dev/null <<YAML || fail "pod intruder-b"
apiVersion: v1
kind: Pod
metadata: {name: intruder-b}
spec:
  nodeName: node-b
  serviceAccountName: other
  containers: [{name: c, image: registry.invalid/pillar/none:0}]
YAML
token() { # SA POD [AUDIENCE]
  kubectl -n pillar create token "$1" --bound-object-kind Pod --bound-object-name "$2" \
    --audience "${3:-pillar-csi.bhyoo.com}" --duration 10m
}
TOK_A=$(token pillar-node plugin-a) && TOK_B=$(token pillar-node plugin-b) &&
  TOK_OTHER_AUD=$(token pillar-node plugin-a some-other-audience) &&
  TOK_OTHER_SA=$(token other intruder-b) && ok "tokens bound to pods on node-a and node-b" ||
  { fail "tokens"; finish; }

pillar_start_agent "$W" || { fail "agent"; finish; }
pillar_start_controller "$W" controller-a --store "kube:$K8S_KUBECONFIG" \
  --node-service-account pillar:pillar-node || { fail "controller"; finish; }

report() { # TOKEN NODE NQN-SUFFIX: RegisterNode through the registry; prints the answer
  local md=()
  [[ -n $1 ]] && md=(--metadata "authorization=Bearer $1")
  pillar_reg "$W" controller-a "${md[@]}" RegisterNode \
    '{"identity":{"nodeId":"'"$2"'","hostNqn":"nqn.2014-08.org.nvmexpress:uuid:'"$3"'","ipAddresses":["192.0.2.'"${4:-10}"'"]}}' 2>&1
}
node_json() { kubectl get pillarnode "$1" -o json 2>/dev/null; }

if out=$(report "$TOK_A" node-a 00000000-0000-4000-8000-00000000000a 10) &&
  [[ $(kubectl get pillarnode node-a -o jsonpath='{.spec.hostNQN}') == *0000000a ]]; then
  ok "node-a reports itself: PillarNode node-a recorded"
else
  fail "node-a reports itself" "$out $(kubectl get pillarnode node-a -o json 2>&1 | head -c 400)"
fi
if out=$(report "$TOK_B" node-b 00000000-0000-4000-8000-00000000000b 11); then
  ok "node-b reports itself"
else
  fail "node-b reports itself" "$out"
fi
before=$(node_json node-b)

# The impostor: node-a's credential claims node-b with its own NQN.
out=$(report "$TOK_A" node-b 00000000-0000-4000-8000-0000000000ee 99)
rc=$?
if ((rc == 7)) && [[ $out == PERMISSION_DENIED* && $out == *node-a* && $out == *node-b* ]]; then
  ok "node-a's token reporting node-b: PERMISSION_DENIED naming both ($(cut -c1-110 <<<"$out"))"
else
  fail "impostor refused" "rc $rc: $out"
fi
if [[ $(node_json node-b) == "$before" ]]; then
  ok "node-b's record is unchanged (same resourceVersion, same NQN)"
else
  fail "node-b unchanged" "$(node_json node-b | head -c 400)"
fi
out=$(report "$TOK_A" node-c 00000000-0000-4000-8000-0000000000cc 12)
rc=$?
if ((rc == 7)) && ! kubectl get pillarnode node-c >/dev/null 2>&1; then
  ok "node-a's token cannot claim a node not yet registered (no PillarNode node-c)"
else
  fail "claim of an unregistered name" "rc $rc: $out"
fi
out=$(pillar_reg "$W" controller-a --metadata "authorization=Bearer $TOK_A" GetNode '{"nodeId":"node-b"}' 2>&1)
rc=$?
if ((rc == 7)); then ok "node-a's token reading node-b's identity: PERMISSION_DENIED"; else fail "GetNode of another node" "rc $rc: $out"; fi
out=$(pillar_reg "$W" controller-a --metadata "authorization=Bearer $TOK_A" GetNode '{"nodeId":"node-a"}' 2>&1)
if [[ $out == *0000000a* ]]; then ok "node-a may read its own record"; else fail "GetNode of itself" "$out"; fi

# Not the node plugin at all.
for c in "none||16" "another audience|$TOK_OTHER_AUD|16" "garbage|not.a.token|16" "another ServiceAccount|$TOK_OTHER_SA|7"; do
  IFS='|' read -r what tok want <<<"$c"
  out=$(report "$tok" node-b 00000000-0000-4000-8000-0000000000ff 98)
  rc=$?
  if ((rc == want)); then
    ok "$what: $(cut -d: -f1 <<<"$out")"
  else
    fail "$what refused with code $want" "rc $rc: $out"
  fi
done
if [[ $(node_json node-b) == "$before" ]]; then
  ok "after every refusal node-b's record is unchanged"
else
  fail "node-b unchanged after refusals"
fi
if grep -q "node-b" "$W/logs/controller-a.log" && grep -qi "refused\|denied" "$W/logs/controller-a.log"; then
  ok "refusals are logged"
else
  fail "refusals logged" "$(tail -5 "$W/logs/controller-a.log")"
fi
finish
