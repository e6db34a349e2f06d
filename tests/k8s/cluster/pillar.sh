# shellcheck shell=bash
# Sourced by cluster.sh once the nodes are Ready: pillar installed with helm
# as a user would (pillarctl certs into Secrets, values for this cluster),
# then a workload's life on each protocol, with a snapshot's life on the
# filesystem volumes. Uses cluster.sh's ok/fail/figure, kubectl, vm_exec, W,
# root, NODE_IP, PILLAR_K8S_IMAGES and PILLAR_SNAPSHOT_CRDS.
# shellcheck disable=SC2154
NS=pillar-system
HELM_BIN=$CSI_BIN/helm
export HELM_CACHE_HOME=$W/helm/cache HELM_CONFIG_HOME=$W/helm/config HELM_DATA_HOME=$W/helm/data
helm() { "$HELM_BIN" --kubeconfig "$W/kubeconfig" "$@"; }
PILLARCTL=$PILLAR_BUILD/src/ctl/pillarctl
STORAGE_AGENT=storage-1
# The protocols whose filesystem volume also goes through online expansion
# and the node plugin's and agent's restarts under I/O (space separated).
LONG_LIFE=${PILLAR_K8S_E2E_LONG-nvmeof-tcp}
# The protocols whose filesystem volume also lives a snapshot's life:
# snapshot, restore, clone (space separated; empty: none).
SNAP_LIFE=${PILLAR_K8S_E2E_SNAPSHOTS-nfs}
# The lives: "ci" (the default) a filesystem volume per protocol; "all" also
# the nvmeof-tcp block volume and NFS ReadWriteMany from both consumers (CI
# has raw block through the external suite's block spec on nvmeof-tcp).
LIVES=${PILLAR_K8S_E2E_LIVES:-ci}
case $LIVES in
  ci | all) ;;
  *) fail "PILLAR_K8S_E2E_LIVES must be ci or all, not \"$LIVES\"" ;;
esac

# On a failure: every pillar container's log (and its previous one), the
# events and the guests' kernel messages, into $W/logs/pillar/ (kept, since
# the run failed), the tails printed.
pillar_failed_before=$failed
pillar_dump() {
  local d=$W/logs/pillar p c n
  mkdir -p "$d"
  kubectl get events -A --sort-by=.lastTimestamp >"$d/events.txt" 2>&1
  kubectl get pods,pvc,pv,volumeattachments,volumesnapshots,volumesnapshotcontents -A -o wide >"$d/objects.txt" 2>&1
  kubectl get pvst,pillarnodes,pillaragents,pillarsnapshots -o yaml >"$d/pillar-objects.yaml" 2>&1
  for p in $(kubectl -n "$NS" get pods -o name 2>/dev/null); do
    for c in $(kubectl -n "$NS" get "$p" -o jsonpath='{.spec.containers[*].name}' 2>/dev/null); do
      kubectl -n "$NS" logs "$p" -c "$c" >"$d/${p#pod/}.$c.log" 2>&1
      kubectl -n "$NS" logs "$p" -c "$c" --previous >"$d/${p#pod/}.$c.previous.log" 2>/dev/null ||
        rm -f "$d/${p#pod/}.$c.previous.log"
    done
  done
  for n in "${NODES[@]}"; do
    vm_exec "$n" --timeout 30 dmesg 2>&1 | tail -n 200 >"$d/dmesg-$n.txt"
    vm_exec "$n" --timeout 30 tail -n 200 /var/log/kubelet.log >"$d/kubelet-$n.log" 2>&1
  done
  echo "---- pillar logs in $d; their tails:"
  for p in "$d"/*.log; do
    [[ $p == */kubelet-* ]] && continue
    echo "-- $(basename "$p")"
    grep -v '"level":"debug"' "$p" | tail -n 8
  done
  echo "-- snapshot-controller.log"
  tail -n 8 "$W/logs/snapshot-controller.log" 2>/dev/null
  echo "-- events (last 25)"
  tail -n 25 "$d/events.txt"
}

# knfsd on the storage node (the agent's container writes the exports).
if vm_exec storage --timeout 120 /usr/local/sbin/pillar-nfs-server start >"$W/logs/nfsd.log" 2>&1; then
  ok "knfsd running on the storage node"
else
  fail "knfsd on the storage node" "$(tail -3 "$W/logs/nfsd.log")"
fi

# ---- certificates, as the README and NOTES say --------------------------------
kubectl create namespace "$NS" >/dev/null
kubectl label node storage pillar-csi.bhyoo.com/storage-node=true >/dev/null
pki=$W/pki-pillar
registry_host=pillar-controller.$NS.svc
if "$PILLARCTL" certs ca --out "$pki/ca" >/dev/null &&
  "$PILLARCTL" certs issue --role agent --name "$STORAGE_AGENT" --ca "$pki/ca" --out "$pki/agent" \
    --dns pillar-agent --ip "${NODE_IP[storage]}" >/dev/null &&
  "$PILLARCTL" certs issue --role controller --name pillar-controller --ca "$pki/ca" --out "$pki/controller" \
    --dns "$registry_host" >/dev/null &&
  "$PILLARCTL" certs issue --role node --name pillar-node --ca "$pki/ca" --out "$pki/node" >/dev/null &&
  "$PILLARCTL" certs issue --role operator --name k8s-e2e --ca "$pki/ca" --out "$pki/operator" >/dev/null; then
  ok "pillarctl certs: a CA, the agent's ($STORAGE_AGENT), the controller's, the node plugins', an operator's"
else
  fail "pillarctl certs"
fi
secret() { # secret NAME DIR
  kubectl -n "$NS" create secret generic "$1" --from-file="$2/tls.crt" --from-file="$2/tls.key" \
    --from-file="$2/ca.crt" >/dev/null
}
if secret "pillar-agent-tls-$STORAGE_AGENT" "$pki/agent" && secret pillar-controller-tls "$pki/controller" &&
  secret pillar-registry-tls "$pki/controller" && secret pillar-node-tls "$pki/node"; then
  ok "the four Secrets in $NS"
else
  fail "the Secrets in $NS"
fi

# ---- snapshots: the cluster's part ------------------------------------------------
# What a cluster brings for snapshots, not pillar's chart: the VolumeSnapshot
# CRDs of the csi-snapshotter sidecar's release (test-k8s-e2e.sh copied them
# from the Go module cache) and its snapshot-controller, here on the host
# beside kube-controller-manager. Before helm install: the chart's
# VolumeSnapshotClass needs the CRDs.
t_snap=$(now_ms)
mapfile -t snapshot_crds < <(ls "${PILLAR_SNAPSHOT_CRDS:-/nonexistent}"/*.yaml 2>/dev/null)
if k8s_start_snapshot_controller "$W" "$CSI_BIN/snapshot-controller" "${snapshot_crds[@]}" 2>>"$W/logs/snapshot-setup.log"; then
  ok "VolumeSnapshot CRDs Established and snapshot-controller $("$CSI_BIN/snapshot-controller" --version 2>&1 | grep -o 'v[0-9][0-9.]*' | head -1) running"
  figure "VolumeSnapshot CRDs and snapshot-controller up in $(since "$t_snap") s"
else
  fail "VolumeSnapshot CRDs and snapshot-controller" "$(tail -3 "$W/logs/snapshot-setup.log")"
fi

# ---- helm install ---------------------------------------------------------------
tag_of() { sed -n "s|^pillar-$1 .*:||p" "$PILLAR_K8S_IMAGES/list"; }
cat >"$W/values.yaml" <<EOF
controller:
  replicas: 1
  nodeSelector: {kubernetes.io/hostname: storage}
  image: {tag: "$(tag_of controller)"}
  agents:
    - {name: $STORAGE_AGENT, address: ${NODE_IP[storage]}, port: 9500, node: storage}
  resyncInterval: 10
  sidecars:
    snapshotter: {enabled: true}
  # Software emulation on two shared cores: an API call can take many
  # seconds, and a controller or sidecar that misses its Lease renewal exits
  # (the sidecars then back off for minutes). Patient Leases and probe.
  leaderElection: {leaseDuration: 60, renewDeadline: 40, retryPeriod: 5}
  livenessProbe: {timeoutSeconds: 20}
node:
  image: {tag: "$(tag_of node)"}
  nodeSelector: {pillar-csi.bhyoo.com/consumer: "true"}
  registrar:
    image: {repository: pillar.test/csi-node-registrar, tag: dev}
agent:
  image: {tag: "$(tag_of agent)"}
storageClasses:
  agent: $STORAGE_AGENT
  pool: local
  classes:
    - {name: pillar-nvmeof-tcp, protocol: nvmeof-tcp, fsType: ext4, acl: true}
    - {name: pillar-iscsi, protocol: iscsi, fsType: ext4, acl: true}
    - {name: pillar-nfs, protocol: nfs, acl: true}
EOF
if helm install pillar "$root/charts/pillar" --namespace "$NS" -f "$W/values.yaml" >"$W/logs/helm-install.log" 2>&1; then
  ok "helm install charts/pillar"
else
  fail "helm install charts/pillar" "$(tail -5 "$W/logs/helm-install.log")"
fi

ready_pods() { # ready_pods SELECTOR N: N pods Ready
  [[ $(kubectl -n "$NS" get pods -l "$1" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c True) == "$2" ]]
}
if took=$(wait_for 600 ready_pods app.kubernetes.io/component=controller 1); then
  ok "the controller pod Ready on the storage node"
  figure "helm install to controller Ready in $took s"
else
  fail "the controller pod Ready" "$(kubectl -n "$NS" get pods -o wide 2>&1; kubectl -n "$NS" describe pods -l app.kubernetes.io/component=controller 2>&1 | tail -20)"
fi
vsc=$(kubectl get volumesnapshotclass pillar-snapshots -o jsonpath='{.driver} {.deletionPolicy}' 2>&1)
if [[ $vsc == "pillar-csi.bhyoo.com Delete" ]]; then
  ok "the chart's VolumeSnapshotClass pillar-snapshots (driver pillar-csi.bhyoo.com, Delete)"
else
  fail "the chart's VolumeSnapshotClass pillar-snapshots" "$vsc"
fi
if took=$(wait_for 300 ready_pods app.kubernetes.io/component=agent 1); then
  ok "the agent pod $STORAGE_AGENT Ready"
else
  fail "the agent pod Ready" "$(kubectl -n "$NS" logs -l app.kubernetes.io/component=agent --tail=20 2>&1)"
fi

# No cluster DNS and no kube-proxy here: the node plugins (host network)
# cannot resolve the registry's Service name. The chart's registry.address
# points them at the controller pod's IP instead (the registry certificate
# still names the Service: --registry-tls-server-name). The consumers get
# their label only now, so each node plugin starts once, with that address.
ctl_ip=$(kubectl -n "$NS" get pods -l app.kubernetes.io/component=controller -o jsonpath='{.items[0].status.podIP}')
if helm upgrade pillar "$root/charts/pillar" --namespace "$NS" -f "$W/values.yaml" \
  --set "registry.address=$ctl_ip:9600" >"$W/logs/helm-upgrade.log" 2>&1; then
  ok "helm upgrade: registry.address=$ctl_ip:9600 (the controller pod)"
else
  fail "helm upgrade with registry.address" "$(tail -5 "$W/logs/helm-upgrade.log")"
fi
kubectl label node consumer-a consumer-b pillar-csi.bhyoo.com/consumer=true >/dev/null
if took=$(wait_for 600 ready_pods app.kubernetes.io/component=node 2); then
  ok "the node plugin on both consumers, registered with their kubelets"
  figure "node plugin DaemonSet Ready on both consumers in $took s"
else
  fail "the node plugin Ready" "$(kubectl -n "$NS" get pods -o wide 2>&1 | tail -5; kubectl -n "$NS" describe pods -l app.kubernetes.io/component=node 2>&1 | grep -A12 Events | head -30)"
fi
csinode_has() { kubectl get csinode "$1" -o jsonpath='{.spec.drivers[*].name}' | grep -q pillar-csi.bhyoo.com; }
for n in consumer-a consumer-b; do
  if wait_for 120 csinode_has "$n" >/dev/null; then ok "CSINode $n lists pillar-csi.bhyoo.com"; else fail "CSINode $n lists the driver"; fi
done
pn_count() { [[ $(kubectl get pillarnodes -o name | wc -l) -ge 2 ]]; }
# Each report is a TLS handshake and a TokenReview: under software emulation
# on a busy machine those took minutes (2026-12-07), hence the wait.
if took=$(wait_for 300 pn_count); then
  ok "both node plugins reported to the registry (PillarNode objects)"
  figure "node plugins' reports to the registry (PillarNode objects) in $took s"
else
  fail "PillarNode objects" "$(kubectl get pillarnodes 2>&1)"
fi
agent_connected() {
  [[ $(kubectl get pillaragent "$STORAGE_AGENT" -o jsonpath='{.status.conditions[?(@.type=="AgentConnected")].status}') == True ]]
}
if wait_for 120 agent_connected >/dev/null; then
  ok "PillarAgent $STORAGE_AGENT AgentConnected (its own certificate, URI pillar-csi://agent/$STORAGE_AGENT)"
else
  fail "PillarAgent $STORAGE_AGENT AgentConnected" "$(kubectl get pillaragent "$STORAGE_AGENT" -o jsonpath='{.status}' 2>&1)"
fi

# ---- a workload's life per protocol -----------------------------------------------
pvc_bound() { [[ $(kubectl get pvc "$1" -o jsonpath='{.status.phase}') == Bound ]]; }
pod_running() { [[ $(kubectl get pod "$1" -o jsonpath='{.status.phase}') == Running ]]; }
pv_gone() { [[ -z $(kubectl get pv -o jsonpath="{.items[?(@.spec.claimRef.name==\"$1\")].metadata.name}") ]]; }
# workload_pod NAME NODE CLAIMS MODE(fs|block) COMMAND. CLAIMS: a PVC (at
# /data, or /dev/xvda in block mode), or PVC:MOUNT-PATH words (fs).
workload_pod() {
  local vol="" vols="" c i=0
  for c in $3; do
    i=$((i + 1))
    if [[ $4 == block ]]; then
      vol+="{name: v$i, devicePath: /dev/xvda}, "
    else
      [[ $c == *:* ]] || c+=:/data
      vol+="{name: v$i, mountPath: ${c#*:}}, "
    fi
    vols+="{name: v$i, persistentVolumeClaim: {claimName: ${c%%:*}}}, "
  done
  if [[ $4 == block ]]; then vol="volumeDevices: [${vol%, }]"; else vol="volumeMounts: [${vol%, }]"; fi
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeName: $2
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/busybox:1.37.0-2
    imagePullPolicy: Never
    command: [sh, -c, '$5']
    $vol
  volumes: [${vols%, }]
EOF
}
# The longest pause between the seconds a pod's loop wrote to FILE, in the
# window since T0 (epoch seconds).
max_gap() { # max_gap POD FILE T0
  kubectl exec "$1" -- cat "$2" 2>/dev/null |
    awk -v t0="$3" '$1 >= t0 { if (p && $1 - p > g) g = $1 - p; p = $1 } END { print g + 0 }'
}
# long_life PROTOCOL PVC POD: with POD (consumer-b) on the volume: online
# expansion seen in the pod; the node plugin's rolling restart while the pod
# writes; the agent's pod restarted while the pod reads.
long_life() {
  local proto=$1 pvc=$2 wb=$3 before after t0 t1 took gap
  before=$(kubectl exec "$wb" -- df -k /data | awk 'NR == 2 { print $2 }')
  kubectl patch pvc "$pvc" --type merge -p '{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}' >/dev/null
  grown() { local a; a=$(kubectl exec "$wb" -- df -k /data | awk 'NR == 2 { print $2 }'); [[ -n $a ]] && ((a > before + 32768)); }
  if took=$(wait_for 300 grown); then
    after=$(kubectl exec "$wb" -- df -k /data | awk 'NR == 2 { print $2 }')
    ok "$proto: online expansion 64Mi -> 128Mi seen in the pod (df: $before -> $after KiB)"
    figure "$proto online expansion seen in the pod in $took s"
  else
    fail "$proto: online expansion seen in the pod" "$(kubectl describe pvc "$pvc" 2>&1 | tail -6)"
  fi
  # The pod's writer (started with it, see life) must be writing. Times are
  # the pod's own clock (a guest's clock drifts from the host's under TCG).
  pod_now() { kubectl exec "$wb" -- date +%s; }
  # Seconds since the writer's last line, by the pod's clock.
  # shellcheck disable=SC2016 # expanded by the pod's shell
  stale() { kubectl exec "$wb" -- sh -c 'echo $(( $(date +%s) - $(tail -n 1 /data/log) ))'; }
  if ! kubectl exec "$wb" -- tail -n 1 /data/log >/dev/null 2>&1; then
    fail "$proto: the pod's writer writes /data/log" "$(kubectl exec "$wb" -- ls -l /data 2>&1)"
    return
  fi
  local s
  t0=$(pod_now) t1=$SECONDS
  kubectl -n "$NS" rollout restart ds/pillar-node >/dev/null
  if kubectl -n "$NS" rollout status ds/pillar-node --timeout=600s >/dev/null 2>&1; then
    sleep 5
    gap=$(max_gap "$wb" /data/log "$t0")
    if s=$(stale) && ((s <= 5)); then
      ok "$proto: the node plugin's rolling restart while the pod writes: the writes go on"
    else
      fail "$proto: writes go on through the node plugin's restart" "last write ${s:-?} s ago: $(kubectl exec "$wb" -- tail -n 2 /data/log 2>&1)"
    fi
    figure "$proto longest I/O pause during the node plugin's rolling restart: $gap s (rollout in $((SECONDS - t1)) s)"
  else
    fail "$proto: node plugin rollout" "$(kubectl -n "$NS" get pods -o wide 2>&1 | tail -4)"
  fi
  t0=$(pod_now) t1=$SECONDS
  kubectl -n "$NS" delete pod -l app.kubernetes.io/component=agent --wait=true --timeout=120s >/dev/null 2>&1
  if wait_for 300 ready_pods app.kubernetes.io/component=agent 1 >/dev/null && sleep 5 &&
    s=$(stale) && ((s <= 5)) && kubectl exec "$wb" -- cat /data/f >/dev/null; then
    ok "$proto: the agent's pod restarted while the pod does I/O: I/O goes on, the data reads back"
  else
    fail "$proto: I/O through the agent's restart" "last write ${s:-?} s ago: $(kubectl exec "$wb" -- tail -n 2 /data/log 2>&1)"
  fi
  figure "$proto longest I/O pause during the agent's restart: $(max_gap "$wb" /data/log "$t0") s (agent back in $((SECONDS - t1)) s)"
}
# The volume's VolumeAttachments are gone (ControllerUnpublishVolume done).
va_gone() { # va_gone PV
  [[ -z $(kubectl get volumeattachments -o jsonpath="{.items[?(@.spec.source.persistentVolumeName==\"$1\")].metadata.name}") ]]
}
# life PROTOCOL CLASS MODE: PVC Bound, a pod on consumer-a writes, the pod is
# deleted, a new pod on consumer-b reads the same bytes, then life_end. The
# protocols of LONG_LIFE keep their fs volume and pod for long_life (run
# once every life is over: it restarts pillar's pods).
life() {
  local proto=$1 class=$2 mode=$3 pvc=pvc-$1-$3 wa=a-$1-$3 wb=b-$1-$3 took data got vm pv
  vm=Filesystem; [[ $mode == block ]] && vm=Block
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $pvc}
spec:
  accessModes: [ReadWriteOnce]
  volumeMode: $vm
  storageClassName: $class
  resources: {requests: {storage: 64Mi}}
EOF
  if took=$(wait_for 300 pvc_bound "$pvc"); then
    ok "$proto/$mode: PVC Bound"
    figure "$proto/$mode PVC to Bound in $took s"
  else
    fail "$proto/$mode: PVC Bound" "$(kubectl describe pvc "$pvc" 2>&1 | tail -5)"
    return
  fi
  pv=$(kubectl get pvc "$pvc" -o jsonpath='{.spec.volumeName}')
  data="pillar-$proto-$mode-$RANDOM$RANDOM"
  if [[ $mode == block ]]; then
    workload_pod "$wa" consumer-a "$pvc" block "echo $data | dd of=/dev/xvda bs=512 count=1 conv=fsync 2>/dev/null; exec sleep 3600"
  else
    workload_pod "$wa" consumer-a "$pvc" fs "echo $data >/data/f && sync && exec sleep 3600"
  fi
  if took=$(wait_for 300 pod_running "$wa"); then
    ok "$proto/$mode: a pod on consumer-a Running with the volume"
    figure "$proto/$mode pod to Running with its volume (consumer-a) in $took s"
  else
    fail "$proto/$mode: pod on consumer-a Running" "$(kubectl describe pod "$wa" 2>&1 | tail -8)"
    kubectl delete pod "$wa" --wait=true --timeout=120s >/dev/null 2>&1
    return
  fi
  sleep 2
  local t_move
  t_move=$(now_ms)
  kubectl delete pod "$wa" --wait=true --timeout=180s >/dev/null 2>&1
  # The new pod only once the volume left consumer-a: created earlier, its
  # kubelet backs off (up to 2 min) while the attach is refused.
  if wait_for 300 va_gone "$pv" >/dev/null; then
    figure "$proto/$mode detach from consumer-a (pod delete to VolumeAttachment gone) in $(since "$t_move") s"
  else
    fail "$proto/$mode: the volume detached from consumer-a" "$(kubectl get volumeattachments 2>&1 | tail -4)"
  fi
  t_move=$(now_ms)
  if [[ $mode == block ]]; then
    workload_pod "$wb" consumer-b "$pvc" block "exec sleep 3600"
  else
    # A writer beside the sleep (a process started by kubectl exec does not
    # outlive the exec here): one line a second, each synced; long_life
    # measures the gaps in it.
    workload_pod "$wb" consumer-b "$pvc" fs "(while :; do date +%s >>/data/log && sync; sleep 1; done) & exec sleep 3600"
  fi
  if wait_for 300 pod_running "$wb" >/dev/null; then
    figure "$proto/$mode attach to consumer-b and pod Running in $(since "$t_move") s"
    if [[ $mode == block ]]; then
      got=$(kubectl exec "$wb" -- sh -c 'dd if=/dev/xvda bs=512 count=1 2>/dev/null | head -1' 2>&1)
    else
      got=$(kubectl exec "$wb" -- cat /data/f 2>&1)
    fi
    if [[ $got == "$data" ]]; then
      ok "$proto/$mode: a new pod on consumer-b reads the bytes the pod on consumer-a wrote"
    else
      fail "$proto/$mode: consumer-b reads the same bytes" "want $data, got ${got:0:200}"
    fi
    [[ $mode == fs && " ${SNAP_LIFE:-} " == *" $proto "* ]] && snap_life "$proto" "$data"
    [[ $mode == fs && " ${LONG_LIFE:-} " == *" $proto "* ]] && return
  else
    fail "$proto/$mode: pod on consumer-b Running" "$(kubectl describe pod "$wb" 2>&1 | tail -8)"
  fi
  life_end "$proto" "$mode"
  if [[ $mode == fs ]]; then snap_end "$proto"; fi
}
life_end() { # life_end PROTOCOL MODE: the pod and the PVC deleted, the PV gone
  local pvc=pvc-$1-$2
  kubectl delete pod "b-$1-$2" --wait=true --timeout=180s >/dev/null 2>&1
  kubectl delete pvc "$pvc" --wait=true --timeout=180s >/dev/null 2>&1
  if wait_for 180 pv_gone "$pvc" >/dev/null; then
    ok "$1/$2: PVC deleted, its PV gone"
  else
    fail "$1/$2: PV gone after the PVC's deletion"
  fi
}

# ---- a snapshot's life (the filesystem volume of each SNAP_LIFE protocol) ----------
vs_ready() { [[ $(kubectl get volumesnapshot "$1" -o jsonpath='{.status.readyToUse}') == true ]]; }
gone() { # gone KIND NAME: the API server answers NotFound (any other answer is not "gone")
  # Not a pipe into grep: under pipefail kubectl's own exit 1 (NotFound) would
  # make every answer "not gone".
  local out
  out=$(kubectl get "$1" "$2" 2>&1)
  [[ $out == *NotFound* ]]
}
# read_direct POD FILE: the file's first line, read with O_DIRECT: from the
# volume, not from the node's page cache.
read_direct() { kubectl exec "$1" -- sh -c "dd if=$2 iflag=direct bs=4096 count=1 2>/dev/null | head -n 1" 2>&1; }
# snap_life PROTOCOL DATA: the source pvc-P-fs holds DATA in /data/f and its
# pod b-P-fs runs on consumer-b. A VolumeSnapshot of the chart's class is
# readyToUse with a restore size; the source is overwritten; a restore
# (dataSource: the VolumeSnapshot) and a clone (dataSource: the source PVC)
# are mounted by one pod on consumer-a: the restore reads DATA, the clone the
# overwrite; then the clone and the source are each written, and neither
# sees the other's write. DATA is kept in $W/run for snap_end, and a mark
# that every step passed.
snap_life() {
  local proto=$1 data=$2 pvc=pvc-$1-fs wb=b-$1-fs vs=snap-$1 sp=s-$1 took size got t0 class
  echo "$data" >"$W/run/snap-$proto.data"
  class=$(kubectl get pvc "$pvc" -o jsonpath='{.spec.storageClassName}')
  kubectl apply -f - >/dev/null <<YAML
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: $vs}
spec:
  volumeSnapshotClassName: pillar-snapshots
  source: {persistentVolumeClaimName: $pvc}
YAML
  if took=$(wait_for 300 vs_ready "$vs"); then
    size=$(kubectl get volumesnapshot "$vs" -o jsonpath='{.status.restoreSize}')
    if [[ -n $size && $size != 0 ]]; then
      ok "$proto: VolumeSnapshot $vs readyToUse, restoreSize $size"
    else
      fail "$proto: the VolumeSnapshot's restoreSize is not zero" "restoreSize [$size]"
    fi
    figure "$proto VolumeSnapshot to readyToUse in $took s"
  else
    fail "$proto: VolumeSnapshot readyToUse" "$(kubectl describe volumesnapshot "$vs" 2>&1 | tail -8)"
    return
  fi
  # The source changes after the snapshot, before the clone.
  if ! kubectl exec "$wb" -- sh -c "echo after-$data >/data/f && sync" >/dev/null 2>&1; then
    fail "$proto: the source overwritten after the snapshot" "$(kubectl exec "$wb" -- ls -l /data 2>&1)"
    return
  fi
  t0=$(now_ms)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: restore-$proto}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: $class
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: $vs}
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: clone-$proto}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: $class
  dataSource: {kind: PersistentVolumeClaim, name: $pvc}
  resources: {requests: {storage: 64Mi}}
YAML
  if wait_for 300 pvc_bound "restore-$proto" >/dev/null && wait_for 300 pvc_bound "clone-$proto" >/dev/null; then
    ok "$proto: a PVC restored from the VolumeSnapshot and a PVC cloned from the source, both Bound"
    figure "$proto restore and clone PVCs to Bound in $(since "$t0") s"
  else
    fail "$proto: restore and clone PVCs Bound" "$(kubectl describe pvc "restore-$proto" "clone-$proto" 2>&1 | grep -A6 Events)"
    return
  fi
  t0=$(now_ms)
  workload_pod "$sp" consumer-a "restore-$proto:/r clone-$proto:/c" fs 'exec sleep 3600'
  if ! wait_for 300 pod_running "$sp" >/dev/null; then
    fail "$proto: a pod on consumer-a with the restore and the clone Running" "$(kubectl describe pod "$sp" 2>&1 | tail -8)"
    return
  fi
  figure "$proto pod with the restore and the clone Running (consumer-a) in $(since "$t0") s"
  got=$(kubectl exec "$sp" -- cat /r/f 2>&1)
  if [[ $got == "$data" ]]; then
    ok "$proto: the restore, on consumer-a, reads the bytes of snapshot time"
  else
    fail "$proto: the restore reads the bytes of snapshot time" "want $data, got ${got:0:200}"
  fi
  got=$(kubectl exec "$sp" -- cat /c/f 2>&1)
  if [[ $got == "after-$data" ]]; then
    ok "$proto: the clone reads the source's bytes at clone time"
  else
    fail "$proto: the clone reads the source's bytes at clone time" "want after-$data, got ${got:0:200}"
  fi
  # Each written on its own: neither sees the other's write.
  kubectl exec "$sp" -- sh -c "echo clone-$data >/c/f && sync" >/dev/null 2>&1
  kubectl exec "$wb" -- sh -c "echo source-$data >/data/f && sync" >/dev/null 2>&1
  got="$(read_direct "$sp" /c/f) $(read_direct "$wb" /data/f) $(read_direct "$sp" /r/f)"
  if [[ $got == "clone-$data source-$data $data" ]]; then
    ok "$proto: the clone and the source diverge (each reads only its own write), the restore unchanged"
    touch "$W/run/snap-$proto.ok"
  else
    fail "$proto: clone and source diverge independently" "want clone-$data source-$data $data, got ${got:0:300}"
  fi
}
# snap_end PROTOCOL: after the source PVC was deleted and its PV went
# (life_end), the VolumeSnapshot is deleted while its restore exists: the
# VolumeSnapshot, its content, its PillarSnapshot and the agent's snapshot
# go; the restore and the clone still read their bytes (O_DIRECT); then the
# pod, the restore and the clone go. After a failed snap_life only the
# clean-up runs (its failure was counted).
snap_end() {
  local proto=$1 vs=snap-$1 sp=s-$1 data content="" handle="" agent_id="" got drift restore_id t0
  [[ -s $W/run/snap-$proto.data ]] || return 0
  if [[ ! -e $W/run/snap-$proto.ok ]]; then
    kubectl delete pod "$sp" --ignore-not-found --wait=true --timeout=180s >/dev/null 2>&1
    kubectl delete volumesnapshot "$vs" --ignore-not-found --wait=false >/dev/null 2>&1
    kubectl delete pvc "restore-$proto" "clone-$proto" --ignore-not-found --wait=true --timeout=180s >/dev/null 2>&1
    return 0
  fi
  data=$(cat "$W/run/snap-$proto.data")
  content=$(kubectl get volumesnapshot "$vs" -o jsonpath='{.status.boundVolumeSnapshotContentName}' 2>/dev/null)
  [[ -z $content ]] || handle=$(kubectl get volumesnapshotcontent "$content" -o jsonpath='{.status.snapshotHandle}' 2>/dev/null)
  [[ -z $handle ]] || agent_id=$(kubectl get pillarsnapshot "$handle" -o jsonpath='{.spec.agentSnapshotID}' 2>/dev/null)
  if [[ -n $agent_id ]] && vs_ready "$vs"; then
    ok "$proto: its source deleted, VolumeSnapshot $vs still readyToUse (PillarSnapshot $handle, the agent's $agent_id)"
  else
    fail "$proto: the VolumeSnapshot, its content and PillarSnapshot after the source's deletion" \
      "content [$content] handle [$handle] agent's id [$agent_id]: $(kubectl describe volumesnapshot "$vs" 2>&1 | tail -6)"
  fi
  t0=$(now_ms)
  kubectl delete volumesnapshot "$vs" --wait=true --timeout=180s >/dev/null 2>&1
  snap_gone() {
    gone volumesnapshot "$vs" && { [[ -z $content ]] || gone volumesnapshotcontent "$content"; } &&
      { [[ -z $handle ]] || gone pillarsnapshot "$handle"; }
  }
  if wait_for 180 snap_gone >/dev/null; then
    ok "$proto: VolumeSnapshot deleted: it, its VolumeSnapshotContent and its PillarSnapshot gone"
    figure "$proto VolumeSnapshot delete to its PillarSnapshot gone in $(since "$t0") s"
  else
    fail "$proto: the deleted snapshot's objects gone" \
      "$(kubectl get volumesnapshot,volumesnapshotcontent 2>&1 | tail -4; kubectl get pillarsnapshot "$handle" 2>&1 | tail -2)"
  fi
  # The agent's own listing, read with an operator's certificate (pillarctl
  # drift): nothing of the snapshot; the restore in sync shows the agent answered.
  restore_id=$(kubectl get pvc "restore-$proto" -o jsonpath='{.spec.volumeName}' 2>/dev/null)
  [[ -z $restore_id ]] || restore_id=$(kubectl get pv "$restore_id" -o jsonpath='{.spec.csi.volumeHandle}' 2>/dev/null)
  drift=$("$PILLARCTL" --kubeconfig "$W/kubeconfig" --agent-tls-cert "$pki/operator/tls.crt" \
    --agent-tls-key "$pki/operator/tls.key" --agent-tls-ca "$pki/operator/ca.crt" drift 2>&1)
  if [[ -n $agent_id && $drift != *"$agent_id"* && -n $restore_id && $drift == *"$restore_id: in sync"* ]]; then
    ok "$proto: the agent no longer lists snapshot $agent_id (pillarctl drift) and serves the restore"
  else
    fail "$proto: the agent's listing without the snapshot" \
      "$(grep -F -e "${agent_id:-?}" -e "${restore_id:-?}" -e cannot <<<"$drift" | head -6)"
  fi
  got="$(read_direct "$sp" /r/f) $(read_direct "$sp" /c/f)"
  if [[ $got == "$data clone-$data" ]]; then
    ok "$proto: source and snapshot deleted: the restore still reads the bytes of snapshot time, the clone its own"
  else
    fail "$proto: the restore and the clone after the source's and the snapshot's deletion" \
      "want $data clone-$data, got ${got:0:300}"
  fi
  # Pod and claims at once (a claim goes once no pod uses it): one wait.
  kubectl delete pod "$sp" --wait=false >/dev/null 2>&1
  kubectl delete pvc "restore-$proto" "clone-$proto" --wait=false >/dev/null 2>&1
  if wait_for 300 pv_gone "restore-$proto" >/dev/null && wait_for 120 pv_gone "clone-$proto" >/dev/null; then
    ok "$proto: the restore's and the clone's PVCs deleted, their PVs gone"
  else
    fail "$proto: the restore's and the clone's PVs gone" "$(kubectl get pv 2>&1 | grep -e "restore-$proto" -e "clone-$proto")"
  fi
}

# NFS, ReadWriteMany: pods on both consumers at once, each reads what the
# other wrote.
rwx() {
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pvc-nfs-rwx}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: pillar-nfs
  resources: {requests: {storage: 64Mi}}
EOF
  if ! wait_for 300 pvc_bound pvc-nfs-rwx >/dev/null; then
    fail "nfs/rwx: PVC Bound" "$(kubectl describe pvc pvc-nfs-rwx 2>&1 | tail -5)"
    return
  fi
  local n t0
  t0=$(now_ms)
  for n in a b; do
    workload_pod "rwx-$n" "consumer-$n" pvc-nfs-rwx fs "echo from-$n >/data/$n && exec sleep 3600"
  done
  if wait_for 300 pod_running rwx-a >/dev/null && wait_for 300 pod_running rwx-b >/dev/null; then
    figure "nfs/rwx two pods (both consumers) Running in $(since "$t0") s"
    sleep 2
    if [[ $(kubectl exec rwx-a -- cat /data/b 2>&1) == from-b && $(kubectl exec rwx-b -- cat /data/a 2>&1) == from-a ]]; then
      ok "nfs/rwx: pods on consumer-a and consumer-b at once, each reads what the other wrote"
    else
      fail "nfs/rwx: each pod reads the other's file" "$(kubectl exec rwx-a -- ls -l /data 2>&1 | head -5)"
    fi
  else
    fail "nfs/rwx: both pods Running" "$(kubectl describe pod rwx-a rwx-b 2>&1 | grep -A3 Events | head -10)"
  fi
  kubectl delete pod rwx-a rwx-b --wait=true --timeout=180s >/dev/null 2>&1
  kubectl delete pvc pvc-nfs-rwx --wait=true --timeout=180s >/dev/null 2>&1
  if wait_for 180 pv_gone pvc-nfs-rwx >/dev/null; then ok "nfs/rwx: PVC deleted, its PV gone"; else fail "nfs/rwx: PV gone"; fi
}

# The workloads only on a complete install (each would wait minutes for what
# cannot come).
if ((failed > pillar_failed_before)); then
  fail "the workloads: not run, pillar's install failed above"
  pillar_dump
  return 0
fi
pillar_installed=1
# Every life at once (each its own PVC and pods; they share only the
# cluster), each into its own log, printed and counted once all are over.
t_lives=$(now_ms)
lives=("nvmeof-tcp pillar-nvmeof-tcp fs" "iscsi pillar-iscsi fs" "nfs pillar-nfs fs")
[[ $LIVES == all ]] && lives+=("nvmeof-tcp pillar-nvmeof-tcp block" rwx)
life_pids=()
for l in "${lives[@]}"; do
  if [[ $l == rwx ]]; then
    rwx >"$W/logs/life-rwx.log" 2>&1 &
  else
    # shellcheck disable=SC2086 # PROTOCOL CLASS MODE
    life $l >"$W/logs/life-${l// /-}.log" 2>&1 &
  fi
  life_pids+=($!)
done
wait "${life_pids[@]}"
for l in "${lives[@]}"; do
  log=$W/logs/life-${l// /-}.log
  cat "$log"
  passed=$((passed + $(grep -c '^ok   - ' "$log")))
  failed=$((failed + $(grep -c '^FAIL - ' "$log")))
done
figure "the workloads' lives ($LIVES: ${#lives[@]}) at once in $(since "$t_lives") s"
for proto in $LONG_LIFE; do
  if kubectl get pod "b-$proto-fs" >/dev/null 2>&1; then
    t_long=$(now_ms)
    long_life "$proto" "pvc-$proto-fs" "b-$proto-fs"
    life_end "$proto" fs
    snap_end "$proto"
    figure "$proto long life (expansion, node plugin and agent restarts) in $(since "$t_long") s"
  fi
done

# No snapshot left in the record (each snapshot's end checked the agent's listing).
left=$(kubectl get pillarsnapshots,volumesnapshots,volumesnapshotcontents -A -o name 2>&1)
if [[ -z $left ]]; then
  ok "no PillarSnapshot, VolumeSnapshot or VolumeSnapshotContent left"
else
  fail "no snapshot objects left" "${left:0:300}"
fi
# Nothing left on the storage node.
left=$(vm_exec storage bash -c 'ls /sys/kernel/config/nvmet/subsystems 2>/dev/null; ls /sys/kernel/config/target/iscsi 2>/dev/null | grep "^iqn[.]"; exportfs 2>/dev/null; losetup -n -O BACK-FILE 2>/dev/null' 2>&1)
if [[ -z ${left//[[:space:]]/} ]]; then
  ok "nothing left on the storage node (no nvmet subsystem, no iSCSI target, no export, no loop device)"
else
  fail "nothing left on the storage node" "${left:0:300}"
fi
((failed == pillar_failed_before)) || pillar_dump
