#!/usr/bin/env bash
# The cluster stage (scripts/test-k8s-e2e.sh runs it inside a network
# namespace of its own; K8S_BIN, CSI_BIN and NODE_BIN point at the built tools).
#
# Layout, all inside that namespace:
#   10.77.0.254 on a tap device: etcd, kube-apiserver (:443, also 10.96.0.1,
#               the kubernetes Service), kube-controller-manager,
#               kube-scheduler, kubectl, helm. The tap joins the guests' hub
#               through a device-less QEMU in a free hub slot.
#               snapshot-controller too, once pillar.sh installed the
#               VolumeSnapshot CRDs.
#   guests (tests/e2e/lib.sh): storage 10.77.0.1 (pods 10.244.1.0/24),
#               consumer-a 10.77.0.11 (10.244.2.0/24), consumer-b 10.77.0.12
#               (10.244.3.0/24); kubelet + containerd + runc + CNI bridge
#               (tests/k8s/cluster/node-setup.sh). Each node routes the
#               others' pod CIDRs and 10.96.0.0/24 to their owners.
# Prints "figure: ..." lines and ends with  k8s-e2e: N passed, M failed
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
W=$(mktemp -d /tmp/pillar-k8s-e2e.XXXXXX)
mkdir -p "$W/logs" "$W/run"
# tests/e2e/lib.sh reads these when sourced. Four "guests": the tap's QEMU
# counts as one.
export PILLAR_E2E_RUN=$W/e2e PILLAR_E2E_MEM=${PILLAR_E2E_MEM:-1024} PILLAR_E2E_MAX_VMS=4
export PILLAR_E2E_SHARES="pillar-k8s-bin=$NODE_BIN"
# shellcheck source=../lib.sh
source "$root/tests/k8s/lib.sh"
# shellcheck source=../../e2e/lib.sh
source "$root/tests/e2e/lib.sh"

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1${2:+: $2}"; }
say() { printf 'k8s-e2e: %s\n' "$*"; }
figure() { echo "figure: $*"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
since() { local d=$(($(now_ms) - $1)); printf '%d.%d' $((d / 1000)) $((d % 1000 / 100)); }
wait_for() { # wait_for SECONDS CMD...: prints the seconds it took
  local limit=$1 t0
  shift
  t0=$(now_ms)
  until "$@" >/dev/null 2>&1; do
    (($(now_ms) - t0 > limit * 1000)) && return 1
    sleep 0.5
  done
  since "$t0"
}

API_IP=10.77.0.254
SVC_IP=10.96.0.1
TAP=pk8s0
declare -A NODE_IP=([storage]=10.77.0.1 [consumer-a]=10.77.0.11 [consumer-b]=10.77.0.12)
declare -A POD_CIDR=([storage]=10.244.1.0/24 [consumer-a]=10.244.2.0/24 [consumer-b]=10.244.3.0/24)
NODES=(storage consumer-a consumer-b)
# The images each node imports: the controller (with its sidecars) and the
# agent run on the storage node, the node plugin and the workloads on the
# consumers.
declare -A NODE_IMAGES=(
  [storage]="pause pillar-agent pillar-controller csi-provisioner csi-attacher csi-resizer csi-snapshotter"
  [consumer-a]="pause busybox pillar-node registrar"
  [consumer-b]="pause busybox pillar-node registrar")
export PILLAR_BUILD
PILLAR_BUILD=$(cd "${PILLAR_BUILD_DIR:-$root/build}" && pwd)

kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$W/kubeconfig" --request-timeout=120s "$@"; }

finish() {
  local rc=$?
  trap - EXIT
  set +e
  if ((failed > 0)); then
    local n
    for n in "${NODES[@]}"; do
      vm_running "$n" || continue
      echo "---- $n: kubelet.log (last 20 lines)"
      vm_exec "$n" --timeout 20 tail -n 20 /var/log/kubelet.log 2>&1
      echo "---- $n: containerd.log (last 10 lines)"
      vm_exec "$n" --timeout 20 tail -n 10 /var/log/containerd.log 2>&1
    done
    kubectl get nodes,pods -A -o wide 2>&1 | head -40
  fi
  [[ -s $W/run/kube-scheduler.pid ]] && _k8s_stop_one "$W/run/kube-scheduler.pid"
  k8s_down "$W"
  vm_stop_all
  ip link delete "$TAP" 2>/dev/null
  ((failed > 0 || rc != 0)) || rm -rf "$W"
  ((rc == 0 || failed > 0)) || fail "the stage ended early (exit $rc)"
  echo "${K8S_E2E_NAME:-k8s-e2e}: $passed passed, $failed failed"
  ((failed == 0)) && exit 0
  exit 1
}

# ---- the network: hub, tap, addresses --------------------------------------
vm_init
trap finish EXIT
ip tuntap add dev "$TAP" mode tap || { fail "tap device $TAP"; exit 1; }
ip addr add "$API_IP/24" dev "$TAP"
ip addr add "$SVC_IP/32" dev "$TAP"
ip link set "$TAP" up
for n in "${NODES[@]}"; do ip route add "${POD_CIDR[$n]}" via "${NODE_IP[$n]}"; done
# The tap joins the hub like a guest: a device-less QEMU in a free slot,
# recorded as a "guest" so vm_stop_all and the watchdog stop it too.
slot=$(e2e__slot k8s-host) || { fail "a free hub slot"; exit 1; }
mkdir -p "$(vm_dir k8s-host)"
qemu-system-x86_64 -machine none -nodefaults -display none -monitor none -serial none -name pillar-k8s-tap \
  -netdev "socket,id=s0,udp=127.0.0.1:$((E2E_NET_BASE + 2 * slot)),localaddr=127.0.0.1:$((E2E_NET_BASE + 2 * slot + 1))" \
  -netdev "tap,id=t0,ifname=$TAP,script=no,downscript=no" \
  -netdev hubport,id=h0,hubid=0,netdev=s0 -netdev hubport,id=h1,hubid=0,netdev=t0 \
  </dev/null >"$W/logs/tap-qemu.log" 2>&1 &
echo $! >"$(vm_dir k8s-host)/pid"

# The images (made by scripts/test-k8s-e2e.sh with images.sh, outside the namespace).
# One OCI archive per kind of node, imported with one ctr call.
t_img=$(now_ms)
# shellcheck disable=SC2086
if [[ ${PILLAR_K8S_E2E_PILLAR:-1} != 1 ]]; then
  NODE_IMAGES=([storage]="pause busybox" [consumer-a]="pause busybox registrar" [consumer-b]="pause busybox registrar")
fi
if [[ -s ${PILLAR_K8S_IMAGES:-}/list ]] &&
  bash "$here/images.sh" --bundle "$PILLAR_K8S_IMAGES" storage ${NODE_IMAGES[storage]} &&
  bash "$here/images.sh" --bundle "$PILLAR_K8S_IMAGES" consumer ${NODE_IMAGES[consumer-a]}; then
  ok "images: $(cut -d' ' -f2 "$PILLAR_K8S_IMAGES/list" | tr '\n' ' ')"
  du -m "$PILLAR_K8S_IMAGES"/*.tar | sed 's|\t.*/| MB |; s/^/  /'
  figure "per-node image archives made in $(since "$t_img") s"
else
  fail "images (PILLAR_K8S_IMAGES)"; exit 1
fi
# Every node boots with one store the host filled with both archives
# (store.sh; cached by the images' digests): no import in the guests.
t_img=$(now_ms)
if STORE=$(bash "$here/store.sh" "$NODE_BIN" "$PILLAR_K8S_IMAGES/storage.oci.tar" "$PILLAR_K8S_IMAGES/consumer.oci.tar" 2>"$W/logs/store.log" | tail -1) &&
  [[ -s $STORE ]]; then
  ok "containerd store pre-filled on the host: $(basename "$STORE")"
  figure "containerd store made or found in $(since "$t_img") s ($(grep -o 'made .*\|cached.*' "$W/logs/store.log" | head -1))"
else
  fail "containerd store (store.sh)" "$(tail -3 "$W/logs/store.log")"; exit 1
fi


# ---- guests boot while the control plane starts -------------------------------
t_boot=$(now_ms)
# no_timer_check: on a loaded host the kernel's IO-APIC timer check can fail
# under TCG and panic the boot ("IO-APIC + timer doesn't work").
for n in "${NODES[@]}"; do vm_start "$n" --ip "${NODE_IP[$n]}/24" --append no_timer_check --disk-image "$STORE"; done

# ---- control plane -----------------------------------------------------------
export K8S_AUTHORIZATION_MODE=Node,RBAC K8S_API_ADDRESS=$API_IP K8S_API_PORT=443 K8S_SERVICE_CIDR=10.96.0.0/24 K8S_API_SANS="IP:$SVC_IP"
export K8S_APISERVER_ARGS="--allow-privileged=true --kubelet-preferred-address-types=InternalIP,Hostname
  --enable-admission-plugins=NodeRestriction
  --kubelet-client-certificate=$W/pki/admin.crt --kubelet-client-key=$W/pki/admin.key"
K8S_APISERVER_ARGS=${K8S_APISERVER_ARGS//$'\n'/ }
t_cp=$(now_ms)
# kube-controller-manager once exited at start here without a line of log;
# a second start is allowed (its log replaces the first one's).
if k8s_up "$W" && { k8s_start_controller_manager "$W" || k8s_start_controller_manager "$W"; }; then
  ok "control plane: etcd, kube-apiserver on $API_IP:443, kube-controller-manager"
else
  fail "control plane"; exit 1
fi
sched_port=$(_k8s_free_ports 1)
_k8s_start "$W" kube-scheduler "$NODE_BIN/kube-scheduler" --kubeconfig="$W/kubeconfig" \
  --authentication-kubeconfig="$W/kubeconfig" --authorization-kubeconfig="$W/kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$sched_port" --leader-elect=false \
  --tls-cert-file="$W/pki/server.crt" --tls-private-key-file="$W/pki/server.key"
if _k8s_wait_url "$W" kube-scheduler "https://127.0.0.1:$sched_port/healthz" 60 '^ok$' kube-scheduler; then
  ok "kube-scheduler healthy"
else
  fail "kube-scheduler healthy"
fi
figure "control plane up in $(since "$t_cp") s"

# ---- nodes -------------------------------------------------------------------
node_creds() { # node_creds NAME DIR: the kubelet's client certificate and kubeconfig
  local n=$1 d=$2
  mkdir -p "$d"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/kubelet.key" 2>/dev/null &&
    openssl req -new -key "$d/kubelet.key" -subj "/O=system:nodes/CN=system:node:$n" -out "$d/kubelet.csr" &&
    openssl x509 -req -in "$d/kubelet.csr" -CA "$W/pki/ca.crt" -CAkey "$W/pki/ca.key" \
      -set_serial "0x$(openssl rand -hex 16)" -days 30 -extfile "$W/pki/openssl.cnf" -extensions v3_client \
      -out "$d/kubelet.crt" 2>/dev/null || return 1
  cp "$W/pki/ca.crt" "$d/ca.crt"
  cat >"$d/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: pillar
  cluster: {server: "https://$API_IP:443", certificate-authority: /etc/kubernetes/ca.crt}
users:
- name: kubelet
  user: {client-certificate: /etc/kubernetes/kubelet.crt, client-key: /etc/kubernetes/kubelet.key}
contexts:
- name: pillar
  context: {cluster: pillar, user: kubelet}
current-context: pillar
EOF
  rm -f "$d/kubelet.csr"
}

for n in "${NODES[@]}"; do
  vm_wait_ready "$n" 180 || { fail "guest $n boots"; exit 1; }
done
figure "3 guests booted in $(since "$t_boot") s"

setup_node() { # setup_node NAME: creds, images and node-setup.sh in the guest
  local n=$1 d=$W/nodes/$1 routes=("10.96.0.0/24=$API_IP") m
  node_creds "$n" "$d/etc" || return 1
  for m in "${NODES[@]}"; do [[ $m == "$n" ]] || routes+=("${POD_CIDR[$m]}=${NODE_IP[$m]}"); done
  vm_copy_in "$n" "$d/etc/." /etc/kubernetes >/dev/null || return 1
  vm_exec "$n" --timeout 900 bash "$here/node-setup.sh" "$n" "${NODE_IP[$n]}" "${POD_CIDR[$n]}" "$API_IP" "${routes[@]}"
}
t_nodes=$(now_ms)
declare -A setup_pid=()
for n in "${NODES[@]}"; do   # the three guests at once (each is its own QEMU)
  setup_node "$n" >"$W/logs/setup-$n.log" 2>&1 &
  setup_pid[$n]=$!
done
for n in "${NODES[@]}"; do
  if wait "${setup_pid[$n]}"; then
    ok "$n: containerd (its store pre-filled) and kubelet started"
    grep -E 'store|imported|up' "$W/logs/setup-$n.log" | sed "s/^/  /"
  else
    fail "$n: node setup" "$(tail -5 "$W/logs/setup-$n.log")"
  fi
done
figure "3 nodes set up (containerd, images, kubelet) in $(since "$t_nodes") s"

node_ready() { # Ready and without the not-ready / uninitialized taints
  [[ $(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] &&
    ! kubectl get node "$1" -o jsonpath='{.spec.taints[*].key}' | grep -q 'not-ready\|unreachable'
}
for n in "${NODES[@]}"; do
  if took=$(wait_for 300 node_ready "$n"); then
    ok "node $n Ready and schedulable"
    figure "node $n Ready $took s after its setup ran (all setups started $(since "$t_nodes") s ago)"
  else
    fail "node $n Ready" "$(kubectl get node "$n" -o wide 2>&1 | tail -1)"
  fi
done
figure "3 nodes from vm_start to Ready in $(since "$t_boot") s"

# Memory of the node daemons.
for n in "${NODES[@]}"; do
  mem=$(vm_exec "$n" --timeout 30 ps -C kubelet,containerd -o comm=,rss= 2>/dev/null | awk '{ printf "%s %d MB  ", $1, $2 / 1024 }')
  free=$(vm_exec "$n" --timeout 30 awk '/MemAvailable/ { printf "%d", $2 / 1024 }' /proc/meminfo 2>/dev/null)
  figure "$n memory: $mem(available $free MB of ${PILLAR_E2E_MEM} MB)"
done

# ---- a first pod -------------------------------------------------------------
pod_phase() { [[ $(kubectl get pod "$1" -o jsonpath='{.status.phase}') == "$2" ]]; }
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  nodeSelector: {kubernetes.io/hostname: consumer-a}
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/busybox:1.37.0-2
    imagePullPolicy: Never
    command: [sh, -c, 'echo hello from \$(hostname); exec sleep 3600']
EOF
if took=$(wait_for 180 pod_phase hello Running); then
  ok "a busybox pod scheduled to consumer-a (kube-scheduler) and Running"
  figure "pod apply to Running (first pod on the node) in $took s"
else
  fail "a busybox pod Running" "$(kubectl describe pod hello 2>&1 | tail -15)"
fi
t_exec=$(now_ms)
if out=$(kubectl exec hello -- cat /proc/1/comm 2>&1) && [[ $out == sleep ]]; then
  ok "kubectl exec into the pod"
  figure "kubectl exec in $(since "$t_exec") s"
else
  fail "kubectl exec into the pod" "$out"
fi
if kubectl logs hello 2>&1 | grep -q "hello from hello"; then ok "kubectl logs"; else fail "kubectl logs"; fi
t_del=$(now_ms)
if kubectl delete pod hello --wait=true --timeout=120s >/dev/null 2>&1; then
  ok "pod deleted"
  figure "pod delete in $(since "$t_del") s"
else
  fail "pod deleted"
fi

# ---- pillar (tests/k8s/cluster/pillar.sh) -------------------------------------
# pillar itself unless PILLAR_K8S_E2E_PILLAR=0 (see README.md beside this file).
if [[ ${PILLAR_K8S_E2E_PILLAR:-1} == 1 ]]; then
  # shellcheck source=pillar.sh
  source "$here/pillar.sh"
  # Kubernetes' external storage suite on the installed pillar.
  if [[ ${pillar_installed:-0} == 1 ]]; then
    # shellcheck source=external-suite.sh
    source "$here/external-suite.sh"
  elif [[ ${PILLAR_K8S_E2E_SUITE:-ci} != 0 ]]; then
    fail "the external storage suite: not run, pillar's install failed above"
  fi
fi
exit 0
