#!/usr/bin/env bash
# Claims at once through the real CSI sidecars (issue 25): a loopback control
# plane (kube-apiserver, etcd, kube-controller-manager from tests/k8s/lib.sh),
# pillar-controller on the Kubernetes store, the real csi-provisioner and
# csi-attacher on its socket, one pillar agent on a simulated configfs (a file
# pool on this host). No kubelet: each Pod is placed with spec.nodeName, so
# the attach/detach controller makes its VolumeAttachment, as in a cluster.
#
#   bench/provision_kube.sh [claims=100] [sidecars=chart|defaults]
#
# 1. CLAIMS PVCs created in one request -> each PVC's time to Bound.
# 2. CLAIMS Pods (one per PVC, all on node-a) created in one request -> each
#    VolumeAttachment's time to attached, and node-a's NQN in every target's
#    ACL afterwards.
# Prints p50/p99/max and the throughput of each. "chart" runs the sidecars
# with the worker and API-rate settings charts/pillar passes them
# (values.yaml controller.sidecars.*); "defaults" with the sidecars' own.
# PILLAR_BENCH_KCM_QPS=Q runs kube-controller-manager with --kube-api-qps=Q
# and --kube-api-burst=2Q (its defaults are 20 and 30): the PV controller's
# binding is several writes per claim under that one client rate.
# Figures, not limits: nothing here fails on time.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/tests/k8s
N=${1:-100}
PROFILE=${2:-chart}
[[ $N =~ ^[0-9]+$ && $N -ge 1 ]] || { echo "usage: $0 [claims>=1] [chart|defaults]" >&2; exit 2; }
[[ $PROFILE == chart || $PROFILE == defaults ]] || { echo "sidecars: chart or defaults" >&2; exit 2; }
# shellcheck source=../tests/k8s/lib.sh
source "$here/lib.sh"
# shellcheck source=../tests/k8s/pillar.sh
source "$here/pillar.sh"
kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$K8S_KUBECONFIG" "$@"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
say() { echo "provision: $*"; }

k8s_tools || exit 1
say "building or finding the CSI sidecars (tests/k8s/build-csi-tools.sh) ..."
CSI_BIN=$("$here/build-csi-tools.sh" | tail -1) || exit 1
W=$(mktemp -d "${TMPDIR:-/tmp}/pillar-bench-prov.XXXXXX")
cleanup() {
  local s
  for s in csi-provisioner csi-attacher; do
    [[ -e $W/run/$s.pid ]] && _k8s_stop_one "$W/run/$s.pid"
  done
  pillar_down "$W"
  k8s_down "$W" >/dev/null 2>&1
  rm -rf "$W"
}
trap cleanup EXIT

if [[ -n ${PILLAR_BENCH_KCM_QPS:-} ]]; then
  [[ $PILLAR_BENCH_KCM_QPS =~ ^[0-9]+$ ]] || { echo "PILLAR_BENCH_KCM_QPS: a number" >&2; exit 2; }
  export K8S_KCM_EXTRA_ARGS="--kube-api-qps=$PILLAR_BENCH_KCM_QPS --kube-api-burst=$((2 * PILLAR_BENCH_KCM_QPS))"
  say "kube-controller-manager: $K8S_KCM_EXTRA_ARGS"
fi
say "starting kube-apiserver, etcd and kube-controller-manager ..."
k8s_up "$W" >/dev/null || exit 1
k8s_start_controller_manager "$W" >/dev/null || exit 1
kubectl apply --server-side -f "$root/deploy/crds/" >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd --all >/dev/null
pillar_start_agent "$W" || exit 1
kubectl create namespace pillar >/dev/null
kubectl -n pillar create serviceaccount pillar-node >/dev/null
cp "$K8S_KUBECONFIG" "$W/controller.kubeconfig"
kubectl --kubeconfig "$W/controller.kubeconfig" config set-context --current --namespace=pillar >/dev/null
pillar_start_controller "$W" controller-a --store "kube:$W/controller.kubeconfig" \
  --node-service-account pillar:pillar-node || exit 1

# The chart's settings (values.yaml controller.sidecars.*): read them from the
# chart itself, so this measures what a user installs.
prov_args=() att_args=()
if [[ $PROFILE == chart ]]; then
  mapfile -t prov_args < <("$CSI_BIN/helm" template b "$root/charts/pillar" 2>/dev/null |
    awk '/- name: csi-provisioner/{f=1} f&&/--(worker-threads|kube-api-qps|kube-api-burst)=/{gsub(/^ *- /,""); print} /- name: csi-attacher/{f=0}')
  mapfile -t att_args < <("$CSI_BIN/helm" template b "$root/charts/pillar" 2>/dev/null |
    awk '/- name: csi-attacher/{f=1} f&&/--(worker-threads|kube-api-qps|kube-api-burst)=/{gsub(/^ *- /,""); print} /- name: csi-resizer/{f=0}')
fi
say "sidecars ($PROFILE): csi-provisioner ${prov_args[*]:-(its defaults)}; csi-attacher ${att_args[*]:-(its defaults)}"
sock=$W/controller-a.sock
_k8s_start "$W" csi-provisioner "$CSI_BIN/csi-provisioner" --csi-address="$sock" --kubeconfig="$K8S_KUBECONFIG" \
  --leader-election=false --extra-create-metadata --feature-gates=Topology=false --timeout=60s --v=2 "${prov_args[@]}"
_k8s_start "$W" csi-attacher "$CSI_BIN/csi-attacher" --csi-address="$sock" --kubeconfig="$K8S_KUBECONFIG" \
  --leader-election=false --timeout=60s --v=2 "${att_args[@]}"

TOKEN=$(pillar_node_a 60m) || exit 1
NQN=nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000a1
pillar_reg "$W" controller-a --metadata "authorization=Bearer $TOKEN" RegisterNode \
  '{"identity":{"nodeId":"node-a","hostNqn":"'"$NQN"'","ipAddresses":["192.0.2.10"]}}' >/dev/null || exit 1
# Let the sidecars find the driver before the clock starts.
for _ in $(seq 1 100); do
  grep -q "Detected CSI driver\|CSI driver name" "$W/logs/csi-attacher.log" 2>/dev/null && break
  sleep 0.2
done

# stats NAME SECONDS_FILE WALL_MS: p50/p99/max of the times, and the rate.
stats() {
  sort -n "$2" | awk -v name="$1" -v wall="$3" '
    { v[NR] = $1 }
    END {
      n = NR; if (n == 0) { print "provision: " name ": none"; exit }
      p50 = v[int((n - 1) * 0.50) + 1]; p99 = v[int((n - 1) * 0.99) + 1]
      printf "figure: %s: %d in %.1f s: p50 %.2f s, p99 %.2f s, max %.2f s, %.1f per second\n",
        name, n, wall / 1000, p50, p99, v[n], n / (wall / 1000)
    }'
}

# wait_all START_MS OUT LISTER: polls LISTER (prints "key done?" lines) until
# N keys are done, writing each key's seconds since START_MS to OUT.
wait_all() {
  local start=$1 out=$2 lister=$3 deadline=$(($(now_ms) + 600000)) t key done_
  declare -A seen=()
  : >"$out"
  while ((${#seen[@]} < N)) && (($(now_ms) < deadline)); do
    t=$(now_ms)
    while read -r key done_; do
      [[ -n $key && $done_ == yes && -z ${seen[$key]:-} ]] || continue
      seen[$key]=1
      awk -v ms=$((t - start)) 'BEGIN { printf "%.3f\n", ms / 1000 }' >>"$out"
    done < <($lister)
    ((${#seen[@]} < N)) && sleep 0.2
  done
  ((${#seen[@]} == N))
}

claims_yaml() {
  local i
  for ((i = 1; i <= N; i++)); do
    printf -- '---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: claim-%d, namespace: default}\n' "$i"
    printf 'spec: {accessModes: [ReadWriteOnce], storageClassName: pillar-nvmeof, resources: {requests: {storage: 4Mi}}}\n'
  done
}
pods_yaml() {
  local i
  for ((i = 1; i <= N; i++)); do
    printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: app-%d, namespace: default}\n' "$i"
    printf 'spec:\n  nodeName: node-a\n  containers: [{name: app, image: registry.invalid/pillar/app:0, volumeMounts: [{name: d, mountPath: /d}]}]\n'
    printf '  volumes: [{name: d, persistentVolumeClaim: {claimName: claim-%d}}]\n' "$i"
  done
}
bound() {
  kubectl get pvc -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}' 2>/dev/null |
    awk '{ print $1, ($2 == "Bound" ? "yes" : "no") }'
}
attached() {
  kubectl get volumeattachment -o jsonpath='{range .items[*]}{.spec.source.persistentVolumeName} {.status.attached}{"\n"}{end}' 2>/dev/null |
    awk '{ print $1, ($2 == "true" ? "yes" : "no") }'
}

say "creating $N PVCs at once ..."
claims_yaml >"$W/claims.yaml"
pods_yaml >"$W/pods.yaml"
# timed_apply YAML TIMES KIND WHAT FIGURE: YAML's objects in one request, then
# each one's time to KIND (wait_all) into TIMES, and the figures.
timed_apply() {
  local t0
  t0=$(now_ms)
  kubectl apply -f "$1" >/dev/null || exit 1
  if ! wait_all "$t0" "$2" "$3"; then
    say "not every $4 within 600 s: $(wc -l <"$2") of $N"
    exit 1
  fi
  stats "$5" "$2" $(($(now_ms) - t0))
}
timed_apply "$W/claims.yaml" "$W/bound.txt" bound "PVC Bound" \
  "$N PVCs created at once to Bound ($PROFILE sidecars)"

say "creating $N Pods at once (one PVC each, all on node-a) ..."
timed_apply "$W/pods.yaml" "$W/attached.txt" attached "VolumeAttachment attached" \
  "$N Pods' VolumeAttachments to attached ($PROFILE sidecars)"

# Every target admits node-a, and only node-a.
acl_ok=0
for d in "$W"/configfs/nvmet/subsystems/*/allowed_hosts; do
  [[ $(ls "$d") == "$NQN" ]] && acl_ok=$((acl_ok + 1))
done
say "targets whose ACL is exactly node-a's NQN: $acl_ok of $N"
[[ $acl_ok -eq $N ]] || exit 1
say "controller CPU: $(ps -o times= -p "$(cat "$W/run/controller-a.pid")" | tr -d ' ') s, RSS $(ps -o rss= -p "$(cat "$W/run/controller-a.pid")" | tr -d ' ') KiB"
