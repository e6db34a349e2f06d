#!/usr/bin/env bash
# The Helm chart charts/pillar with real parts: helm v4 and the CSI sidecars
# (built from their Go modules by tests/k8s/build-csi-tools.sh), the built
# kubectl, a real kube-apiserver and kube-controller-manager
# (tests/k8s/lib.sh), and pillar's own binaries.
#   - helm lint --strict, with the default values and with non-default ones
#   - helm template, default and non-default (certManager mode, snapshotter
#     on, another namespace, custom pools, kubelet dir, 3 replicas, another
#     node ServiceAccount), checked object by object (parsed by the built
#     kubectl offline, queried with jq); every flag passed to pillar's
#     daemons and to the sidecars is one their --help knows
#   - the chart's CRDs equal deploy/crds, byte for byte and as parsed
#     objects, and the comparison catches a changed copy
#   - values the schema must refuse fail helm template, naming the field
#   - metrics: --metrics-address and a port named metrics per component (per
#     agent DaemonSet), a headless metrics Service each; ServiceMonitors and
#     the Grafana dashboard's ConfigMap only when asked; nothing of it with
#     metrics.enabled=false; the dashboard (valid JSON, only metric names the
#     daemons export, equal to deploy/grafana's copy)
#   - every rendered object applied with server-side apply (CRDs first,
#     Established); the controller's pods made by the real Deployment
#     controller (Pending: no kubelet); the certManager render as a
#     --dry-run=server of the kinds the harness has (no cert-manager here;
#     the VolumeSnapshot CRDs installed for its VolumeSnapshotClass)
#   - RBAC with kubectl auth can-i as each ServiceAccount, and a TokenReview
#     of a node plugin token made as the controller's ServiceAccount
#   - the rendered pillar-controller arguments run as the controller's
#     ServiceAccount: leader and standby, the rendered liveness probe on
#     both and on a dead leader, failover; the real csi-provisioner,
#     csi-attacher and csi-resizer with their rendered arguments beside it,
#     leading, with no request forbidden; the rendered --metrics-address
#     (moved to loopback) serves pillar_controller_leader 1 on the leader
#   - helm install, NOTES, helm status, helm uninstall
# Prints  figure: helm template in N.NN s. Last line:
#   k8s-chart: N passed, M failed
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib.sh
source "$here/lib.sh"
# shellcheck source=../pillar.sh
source "$here/pillar.sh"
# shellcheck source=../suite.sh
source "$here/suite.sh"
suite_begin k8s-chart "controller-*.log" "csi-*.log" kube-controller-manager.log kube-apiserver.log

suite_cleanup() { # the CSI sidecars started below
  local s
  for s in csi-provisioner csi-attacher csi-resizer; do
    [[ -e $W/run/$s.pid ]] && _k8s_stop_one "$W/run/$s.pid"
  done
  return 0
}

chart=$root/charts/pillar
DRIVER=pillar-csi.bhyoo.com
NS=pillar-system     # the default render's namespace
NS2=storage-system   # the non-default render's namespace

# check NAME JQ-FILTER [JSON-FILE]: one check, passed when the filter is true
# on the rendered objects (a JSON array; default $J).
check() {
  local out
  if out=$(jq -e "$2" "${3:-$J}" 2>&1) && [[ $out == true ]]; then
    ok "$1"
  else
    fail "$1" "${out:0:300}"
  fi
}
# expect_eq NAME WANT GOT
expect_eq() {
  if [[ $2 == "$3" ]]; then ok "$1"; else fail "$1" "want [$2], got [$3]"; fi
}

# ---- tools ------------------------------------------------------------------
k8s_tools || { fail "k8s tools (tests/k8s/build-tools.sh)"; finish; }
CSI_BIN=$("$here/build-csi-tools.sh" --print-bindir)
# Every sidecar is run below, not only helm: build whatever is missing.
if ! "$here/build-csi-tools.sh" --check; then
  CSI_BIN=$("$here/build-csi-tools.sh" | tail -1)
fi
HELM_BIN=${CSI_BIN:-/nonexistent}/helm
[[ -x $HELM_BIN ]] || { fail "helm built by tests/k8s/build-csi-tools.sh" "no $HELM_BIN"; finish; }
# helm's own state in the work dir, never in ~/.config or ~/.cache.
export HELM_CACHE_HOME=$W/helm/cache HELM_CONFIG_HOME=$W/helm/config HELM_DATA_HOME=$W/helm/data
helm() { "$HELM_BIN" "$@"; }
hv=$(helm version --template '{{.Version}}' 2>&1)
expect_eq "helm is v4.3.2" v4.3.2 "$hv"

# tojson YAML-FILE: the objects of a YAML stream as one JSON array, parsed by
# the built kubectl without a server (label --local; the label it is asked
# to remove is absent, so the objects come back as they were, with an empty
# labels map where they had none).
tojson() {
  "$K8S_BIN/kubectl" --kubeconfig=/dev/null label --local -f "$1" pillar-chart-test- -o json |
    jq -s 'map(if .metadata.labels == {} then del(.metadata.labels) else . end)'
}
obj() { printf '.[] | select(.kind == "%s" and .metadata.name == "%s")' "$1" "$2"; }

APP_VERSION=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart/Chart.yaml")
if [[ -n $APP_VERSION ]] && grep -qx 'apiVersion: v2' "$chart/Chart.yaml" && grep -qx 'name: pillar' "$chart/Chart.yaml"; then
  ok "Chart.yaml: apiVersion v2, name pillar, appVersion $APP_VERSION"
else
  fail "Chart.yaml: apiVersion v2, name pillar, an appVersion"
fi

# ---- non-default values -----------------------------------------------------
cat >"$W/custom.yaml" <<'YAML'
logLevel: debug
kubeletDir: /var/snap/microk8s/common/var/lib/kubelet
tls:
  mode: certManager
  agentServerName: agent.storage.example
registry:
  port: 9601
serviceAccounts:
  node:
    name: pillar-node-plugin
controller:
  replicas: 3
  leaderElection: {leaseDuration: 60, renewDeadline: 40, retryPeriod: 5}
  agents:
    - name: storage-1
      address: 10.0.0.5
      port: 9700
      node: storage-node-1
    - name: storage-2
      address: fd00::5
      port: 9701
      tlsServerName: storage-2.example
      node: storage-node-2
    - name: outside-1
      address: 10.0.0.6
      port: 9700
  sidecars:
    snapshotter:
      enabled: true
node:
  tolerations: []
  nodeSelector:
    pillar-csi.bhyoo.com/consumer: "true"
agent:
  listen: 0.0.0.0:9700
  pools:
    - name: tank/k8s
      type: zfs
    - name: vg0
      type: lvm-thin
      thinPool: thin0
    - name: scratch
      type: file
      path: /srv/pillar
  protocols: [nvmeof-tcp, iscsi]
storageClasses:
  agent: storage-1
  pool: tank/k8s
  classes:
    - name: pillar-fast
      protocol: nvmeof-tcp
      fsType: xfs
      default: true
      parameters:
        inCapsuleDataSize: "8192"
        backend.compression: lz4
    - name: pillar-shared
      protocol: nfs
      pool: scratch
      acl: false
      reclaimPolicy: Retain
      parameters:
        nfsRootOwner: "1000:1000"
        nfsRootMode: "2770"
YAML

# ---- lint -------------------------------------------------------------------
if helm lint --strict "$chart" >"$W/lint.out" 2>&1; then
  ok "helm lint --strict (default values)"
else
  fail "helm lint --strict (default values)" "$(tail -5 "$W/lint.out")"
fi
if helm lint --strict "$chart" -f "$W/custom.yaml" >"$W/lint2.out" 2>&1; then
  ok "helm lint --strict (non-default values)"
else
  fail "helm lint --strict (non-default values)" "$(tail -5 "$W/lint2.out")"
fi

# ---- render: default values ---------------------------------------------------
t0=$(_k8s_now)
if helm template pillar "$chart" --namespace "$NS" >"$W/default.yaml" 2>"$W/default.err"; then
  render_s=$(awk -v a="$t0" -v b="$(_k8s_now)" 'BEGIN { printf "%.2f", b - a }')
  ok "helm template with the default values"
else
  fail "helm template with the default values" "$(cat "$W/default.err")"
  finish
fi
echo "figure: helm template in $render_s s"
tojson "$W/default.yaml" >"$W/default.json" || { fail "default render parses"; finish; }
J=$W/default.json
ok "default render parses ($(jq length "$J") objects)"

kinds=$(jq -r 'group_by(.kind) | map("\(.[0].kind)=\(length)") | join(" ")' "$J")
expect_eq "default render: the objects" \
  "ClusterRole=4 ClusterRoleBinding=4 CSIDriver=1 DaemonSet=1 Deployment=1 Role=3 RoleBinding=3 Service=3 ServiceAccount=3 StorageClass=3" \
  "$(tr ' ' '\n' <<<"$kinds" | LC_ALL=C sort -f | tr '\n' ' ' | sed 's/ $//')"
check "every namespaced object is in $NS (but the Events Role and its binding, in default)" \
  "([.[] | select(.kind | IN(\"CSIDriver\",\"ClusterRole\",\"ClusterRoleBinding\",\"StorageClass\") | not)
    | select(.metadata.name != \"pillar-controller-events\") | .metadata.namespace] | all(. == \"$NS\"))
   and ([.[] | select(.metadata.name == \"pillar-controller-events\") | \"\\(.kind)/\\(.metadata.namespace)\"]
        == [\"Role/default\", \"RoleBinding/default\"])"
check "no cert-manager object in secrets mode" '[.[] | select(.apiVersion | startswith("cert-manager.io"))] | length == 0'

check "CSIDriver $DRIVER: attachRequired, no pod info, fsGroupPolicy File, Persistent only, no republish" \
  "$(obj CSIDriver $DRIVER) | .spec == {attachRequired: true, podInfoOnMount: false, fsGroupPolicy: \"File\",
    requiresRepublish: false, volumeLifecycleModes: [\"Persistent\"]}"

# The controller Deployment.
D=$(obj Deployment pillar-controller)
ctl=".spec.template.spec.containers[] | select(.name == \"pillar-controller\")"
check "controller: 2 replicas" "$D | .spec.replicas == 2"
check "controller: pillar-controller and the three sidecars, no snapshotter" \
  "[$D | .spec.template.spec.containers[].name] == [\"pillar-controller\",\"csi-provisioner\",\"csi-attacher\",\"csi-resizer\"]"
check "controller: --store=kube, --csi-endpoint unix:///csi/csi.sock, --leader-election-identity=\$(POD_NAME)" \
  "$D | $ctl | .args | (index(\"--store=kube\") != null) and (index(\"--csi-endpoint=unix:///csi/csi.sock\") != null)
    and (index(\"--leader-election-identity=\$(POD_NAME)\") != null)"
check "controller: POD_NAME and POD_NAMESPACE from the downward API" \
  "$D | $ctl | [.env[] | {(.name): .valueFrom.fieldRef.fieldPath}] | add == {POD_NAME: \"metadata.name\", POD_NAMESPACE: \"metadata.namespace\", POD_IP: \"status.podIP\"}"
check "controller: image ghcr.io/bhyoo/pillar-controller:$APP_VERSION" \
  "$D | $ctl | .image == \"ghcr.io/bhyoo/pillar-controller:$APP_VERSION\""
check "controller: agent client TLS from Secret pillar-controller-tls" \
  "$D | .spec.template.spec as \$s | (\$s.volumes[] | select(.name == \"agent-tls\") | .secret.secretName == \"pillar-controller-tls\")
    and ([\$s.containers[0].volumeMounts[] | select(.name == \"agent-tls\") | .mountPath] == [\"/etc/pillar-csi/agent-tls\"])
    and (\$s.containers[0].args | index(\"--agent-tls-cert=/etc/pillar-csi/agent-tls/tls.crt\") != null)"
check "controller: registry TLS from Secret pillar-registry-tls, not insecure" \
  "$D | .spec.template.spec as \$s | (\$s.volumes[] | select(.name == \"registry-tls\") | .secret.secretName == \"pillar-registry-tls\")
    and (\$s.containers[0].args | (index(\"--registry-tls-cert=/etc/pillar-csi/registry-tls/tls.crt\") != null) and (index(\"--registry-insecure\") == null))"
check "controller: the liveness probe is an exec probe (a standby has no registry port and no ready file)" \
  "$D | $ctl | .livenessProbe | (.exec.command | length > 0) and (has(\"tcpSocket\") | not) and (has(\"grpc\") | not) and (has(\"httpGet\") | not)"
check "controller: every container shares the emptyDir socket-dir at /csi" \
  "$D | .spec.template.spec as \$s | (\$s.volumes[] | select(.name == \"socket-dir\") | has(\"emptyDir\"))
    and ([\$s.containers[] | [.volumeMounts[] | select(.name == \"socket-dir\") | .mountPath] == [\"/csi\"]] | all)"
sidecar() { printf '%s | .spec.template.spec.containers[] | select(.name == "%s")' "$D" "$1"; }
check "csi-provisioner: socket, leader election, extra create metadata, Topology off, image v6.4.0" \
  "$(sidecar csi-provisioner) | (.image == \"registry.k8s.io/sig-storage/csi-provisioner:v6.4.0\") and (.args |
    (index(\"--csi-address=/csi/csi.sock\") != null) and (index(\"--leader-election\") != null)
    and (index(\"--extra-create-metadata\") != null) and (index(\"--feature-gates=Topology=false\") != null))"
check "csi-attacher: socket, leader election, image v4.13.0" \
  "$(sidecar csi-attacher) | (.image == \"registry.k8s.io/sig-storage/csi-attacher:v4.13.0\") and (.args |
    (index(\"--csi-address=/csi/csi.sock\") != null) and (index(\"--leader-election\") != null))"
check "csi-resizer: socket, leader election, image v2.3.0" \
  "$(sidecar csi-resizer) | (.image == \"registry.k8s.io/sig-storage/csi-resizer:v2.3.0\") and (.args |
    (index(\"--csi-address=/csi/csi.sock\") != null) and (index(\"--leader-election\") != null))"
# Calls at once and API rates (controller.sidecars.*): a burst of claims is
# not held to the sidecars' own 5 requests/s (bench/provision_kube.sh).
rate_args() {
  printf '%s' "$(sidecar "$1") | [.args[] | select(test(\"^--(worker-threads|workers|kube-api-qps|kube-api-burst)=\"))]"
}
check "csi-provisioner: 100 workers, 50 requests/s, burst 100" \
  "$(rate_args csi-provisioner) == [\"--worker-threads=100\", \"--kube-api-qps=50\", \"--kube-api-burst=100\"]"
check "csi-attacher: 50 workers, 50 requests/s, burst 100" \
  "$(rate_args csi-attacher) == [\"--worker-threads=50\", \"--kube-api-qps=50\", \"--kube-api-burst=100\"]"
check "csi-resizer: --workers (its flag's name) 10, 20 requests/s, burst 40" \
  "$(rate_args csi-resizer) == [\"--workers=10\", \"--kube-api-qps=20\", \"--kube-api-burst=40\"]"
# One set of Lease timings for the controller and its sidecars (a sidecar
# that loses its Lease exits: it must be as patient as the controller).
# lease_args RENDER: per container, its three leader-election timing flags.
lease_args() {
  printf '%s' "$1 | .spec.template.spec.containers[] | [.args[] | select(test(\"^--leader-election-(lease-duration|renew-deadline|retry-period)=\"))]"
}
check "controller and every sidecar: --leader-election lease 15 s, renew 10 s, retry 2 s (controller.leaderElection)" \
  "[$(lease_args "$D")] == ([[\"--leader-election-lease-duration=15\", \"--leader-election-renew-deadline=10\", \"--leader-election-retry-period=2\"]]
    + [range(3) | [\"--leader-election-lease-duration=15s\", \"--leader-election-renew-deadline=10s\", \"--leader-election-retry-period=2s\"]])"

# The registry Service.
check "Service pillar-controller: port 9600 to the registry port, selecting the controller pods" \
  "($(obj Service pillar-controller)) as \$svc | ($D) as \$d |
    (\$svc.spec.ports == [{name: \"registry\", port: 9600, targetPort: \"registry\", protocol: \"TCP\"}])
    and (\$svc.spec.selector | to_entries | all(. as \$e | \$d.spec.template.metadata.labels[\$e.key] == \$e.value))
    and (\$svc.spec.selector | to_entries | all(. as \$e | \$d.spec.selector.matchLabels[\$e.key] == \$e.value))
    and ([\$d | $ctl | .ports[] | select(.name == \"registry\") | .containerPort] == [9600])"

# Metrics (on by default): the flag, a port named metrics, a headless Service
# selecting the pods; no ServiceMonitor and no dashboard unless asked.
# metrics_svc SVC-NAME PORT POD-OBJECT: the Service's port "metrics" is PORT,
# to the pods' port "metrics", selecting the pod template's labels.
metrics_svc() {
  printf '(%s) as $svc | (%s) as $w |
    ($svc.spec.ports == [{name: "metrics", port: %s, targetPort: "metrics", protocol: "TCP"}])
    and $svc.spec.clusterIP == "None" and $svc.metadata.labels["pillar-csi.bhyoo.com/metrics"] == "true"
    and ($svc.spec.selector | length > 0 and (to_entries | all(. as $e | $w.spec.template.metadata.labels[$e.key] == $e.value)))' \
    "$(obj Service "$1")" "$3" "$2"
}
# metrics_pod POD-OBJECT CONTAINER PORT HOSTPORT(true|false): the container's
# --metrics-address=0.0.0.0:PORT and its port named metrics.
metrics_pod() {
  printf '%s | .spec.template.spec.containers[] | select(.name == "%s") |
    ([.args[] | select(startswith("--metrics-address"))] == ["--metrics-address=0.0.0.0:%s"])
    and ([.ports[] | select(.name == "metrics")] == [{name: "metrics", containerPort: %s, protocol: "TCP"}
      + (if %s then {hostPort: %s} else {} end)])' "$1" "$2" "$3" "$3" "$4" "$3"
}
check "metrics: controller --metrics-address=0.0.0.0:9650, container port metrics 9650" "$(metrics_pod "$D" pillar-controller 9650 false)"
check "metrics: Service pillar-controller-metrics, headless, port metrics 9650, selecting the controller pods" \
  "$(metrics_svc pillar-controller-metrics 9650 "$D")"
check "metrics: no agent metrics Service without an agent, no ServiceMonitor, no dashboard ConfigMap by default" \
  '[.[] | select(.metadata.name == "pillar-agent-metrics" or .kind == "ServiceMonitor" or .kind == "ConfigMap")] | length == 0'

# The node plugin.
N=$(obj DaemonSet pillar-node)
nd=".spec.template.spec.containers[] | select(.name == \"pillar-node\")"
check "node: privileged, host network, node ID from spec.nodeName" \
  "$N | .spec.template.spec as \$s | \$s.hostNetwork == true and (\$s.containers[0].securityContext.privileged == true)
    and (\$s.containers[0].args | index(\"--node-id=\$(NODE_NAME)\") != null)
    and ([\$s.containers[0].env[] | select(.name == \"NODE_NAME\") | .valueFrom.fieldRef.fieldPath] == [\"spec.nodeName\"])"
check "node: --registry-address is the controller Service, port 9600" \
  "$N | $nd | .args | index(\"--registry-address=pillar-controller.$NS.svc:9600\") != null"
check "node: projected token, audience $DRIVER, 3600 s, passed as --registry-token-file" \
  "$N | .spec.template.spec as \$s | (\$s.volumes[] | select(.name == \"registry-token\") | .projected.sources ==
      [{serviceAccountToken: {audience: \"$DRIVER\", expirationSeconds: 3600, path: \"token\"}}])
    and ([\$s.containers[0].volumeMounts[] | select(.name == \"registry-token\") | .mountPath + \"/token\"] as \$p
      | \$s.containers[0].args | index(\"--registry-token-file=\" + \$p[0]) != null)"
hostpath() { # hostpath DS-FILTER CONTAINER PATH: the container mounts host PATH at PATH
  # shellcheck disable=SC2016
  printf '(%s | .spec.template.spec as $s | [$s.volumes[] | select(.hostPath.path == "%s") | .name] as $v |
    ($v | length == 1) and ([$s.containers[] | select(.name == "%s") | .volumeMounts[] | select(.name == $v[0]) | .mountPath] == ["%s"]))' \
    "$1" "$3" "$2" "$3"
}
check "node: the kubelet dir /var/lib/kubelet mounted Bidirectional" \
  "$(hostpath "$N" pillar-node /var/lib/kubelet) and ($N | $nd | [.volumeMounts[] | select(.mountPath == \"/var/lib/kubelet\") | .mountPropagation] == [\"Bidirectional\"])"
for p in /dev /sys /etc/nvme /etc/iscsi /run/udev /lib/modules /var/lib/pillar-csi/node; do
  check "node: host $p mounted" "$(hostpath "$N" pillar-node $p)"
done
check "node: /lib/modules read-only" "$N | $nd | [.volumeMounts[] | select(.mountPath == \"/lib/modules\") | .readOnly] == [true]"
check "node-driver-registrar: --kubelet-registration-path in the kubelet's plugin dir, registration dir mounted" \
  "$N | .spec.template.spec.containers[] | select(.name == \"node-driver-registrar\") |
    (.image == \"registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.15.0\")
    and (.args | index(\"--csi-address=/csi/csi.sock\") != null and index(\"--kubelet-registration-path=/var/lib/kubelet/plugins/$DRIVER/csi.sock\") != null)
    and ([.volumeMounts[] | select(.mountPath == \"/registration\") | .name] | length == 1)"
check "node: the registrar and the plugin share the plugin dir" \
  "$(hostpath "$N" pillar-node /var/lib/kubelet/plugins/$DRIVER | sed 's/\["\/var\/lib\/kubelet\/plugins\/pillar-csi.bhyoo.com"\]/["\/csi"]/') and
   ($(hostpath "$N" node-driver-registrar /var/lib/kubelet/plugins_registry | sed 's/\["\/var\/lib\/kubelet\/plugins_registry"\]/["\/registration"]/'))"
check "node: tolerates every taint by default, no API token mounted" \
  "$N | .spec.template.spec | (.tolerations == [{operator: \"Exists\"}]) and (.automountServiceAccountToken == false)"
check "metrics: node --metrics-address=0.0.0.0:9652, port metrics 9652 with hostPort (host network)" "$(metrics_pod "$N" pillar-node 9652 true)"
check "metrics: Service pillar-node-metrics, headless, port metrics 9652, selecting the node pods" \
  "$(metrics_svc pillar-node-metrics 9652 "$N")"

# The node ServiceAccount and the controller's --node-service-account.
node_sa=$(jq -r "$N | .spec.template.spec.serviceAccountName" "$J")
expect_eq "node: ServiceAccount pillar-node" pillar-node "$node_sa"
check "controller: --node-service-account=$NS:$node_sa, the node DaemonSet's ServiceAccount, which is rendered" \
  "($D | $ctl | .args | index(\"--node-service-account=$NS:$node_sa\") != null) and ([$(obj ServiceAccount "$node_sa")] | length == 1)"

# The agents: none by default (controller.agents is empty); one DaemonSet per
# entry with a node, pinned there, with that agent's own Secret.
check "default render: no agent DaemonSet (no controller.agents entry)" \
  '[.[] | select(.kind == "DaemonSet" and (.metadata.name | contains("agent")))] | length == 0'
AGENT1='[{"name":"storage-1","address":"10.0.0.5","port":9500,"node":"storage-1"}]'
if helm template pillar "$chart" --namespace "$NS" --set-json "controller.agents=$AGENT1" >"$W/agent1.yaml" 2>"$W/err" &&
  tojson "$W/agent1.yaml" >"$W/agent1.json"; then
  ok "helm template with one agent on node storage-1"
else
  fail "helm template with one agent on node storage-1" "$(cat "$W/err")"
  finish
fi
J=$W/agent1.json
A=$(obj DaemonSet pillar-agent-storage-1)
ag=".spec.template.spec.containers[] | select(.name == \"pillar-agent\")"
check "one agent: the default objects plus DaemonSet pillar-agent-storage-1 and Service pillar-agent-metrics" \
  "([.[] | select(.kind == \"DaemonSet\") | .metadata.name] | sort) == [\"pillar-agent-storage-1\", \"pillar-node\"]
    and ([.[] | select(.kind == \"Service\") | .metadata.name] | index(\"pillar-agent-metrics\") != null)
    and length == $(jq length "$W/default.json") + 2"
check "agent: pinned to node storage-1 (and the storage-node label), host network, privileged" \
  "$A | .spec.template.spec | (.nodeSelector == {\"kubernetes.io/hostname\": \"storage-1\", \"pillar-csi.bhyoo.com/storage-node\": \"true\"}) and .hostNetwork
    and (.containers[0].securityContext.privileged == true)"
check "agent: its own pod selector (label pillar-csi.bhyoo.com/agent=storage-1)" \
  "$A | .spec.selector.matchLabels[\"pillar-csi.bhyoo.com/agent\"] == \"storage-1\"
    and .spec.template.metadata.labels[\"pillar-csi.bhyoo.com/agent\"] == \"storage-1\""
check "agent: --listen=0.0.0.0:9500, the default file pool, server TLS from its own Secret pillar-agent-tls-storage-1" \
  "$A | .spec.template.spec as \$s | (\$s.containers[0].args | index(\"--listen=0.0.0.0:9500\") != null
      and ([.[] | select(startswith(\"--pool\"))] == [\"--pool=local=file:/var/lib/pillar-csi/pools/local\"])
      and index(\"--tls-cert=/etc/pillar-csi/tls/tls.crt\") != null)
    and (\$s.volumes[] | select(.name == \"tls\") | .secret.secretName == \"pillar-agent-tls-storage-1\")"
check "controller: --agent=storage-1=10.0.0.5:9500@pillar-agent" \
  "[$(obj Deployment pillar-controller) | .spec.template.spec.containers[0].args[] | select(startswith(\"--agent=\"))] ==
    [\"--agent=storage-1=10.0.0.5:9500@pillar-agent\"]"
for p in /sys/kernel/config /dev /lib/modules /var/lib/pillar-csi /etc/exports.d /var/lib/pillar-csi/pools/local; do
  check "agent: host $p mounted" "$(hostpath "$A" pillar-agent $p)"
done
# runc refuses a mount inside the container's /proc: nfsd's directory is
# mounted elsewhere, and the agent told where.
check "agent: host /proc/fs/nfsd mounted read-only at /host/proc/fs/nfsd, --nfsd-proc names it" \
  "$A | .spec.template.spec as \$s | [\$s.volumes[] | select(.hostPath.path == \"/proc/fs/nfsd\") | .name] as \$v |
    (\$v | length == 1) and ([\$s.containers[0].volumeMounts[] | select(.name == \$v[0]) | [.mountPath, .readOnly]] == [[\"/host/proc/fs/nfsd\", true]])
    and (\$s.containers[0].args | index(\"--nfsd-proc=/host/proc/fs/nfsd\") != null)"
check "agent: --state-dir under the mounted state dir" "$A | $ag | .args | index(\"--state-dir=/var/lib/pillar-csi/agent\") != null"
check "metrics: agent --metrics-address=0.0.0.0:9651, port metrics 9651 with hostPort (host network)" "$(metrics_pod "$A" pillar-agent 9651 true)"
check "metrics: Service pillar-agent-metrics, headless, port metrics 9651, selecting the agent pods" \
  "$(metrics_svc pillar-agent-metrics 9651 "$A")"

# Images and pull policies come from the values.
check "every container image is from the values (pillar images at the chart's appVersion)" \
  "[.[] | select(.kind == \"Deployment\" or .kind == \"DaemonSet\") | .spec.template.spec.containers[] | .image] | sort ==
    ([\"ghcr.io/bhyoo/pillar-agent:$APP_VERSION\", \"ghcr.io/bhyoo/pillar-controller:$APP_VERSION\", \"ghcr.io/bhyoo/pillar-node:$APP_VERSION\",
      \"registry.k8s.io/sig-storage/csi-attacher:v4.13.0\", \"registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.15.0\",
      \"registry.k8s.io/sig-storage/csi-provisioner:v6.4.0\", \"registry.k8s.io/sig-storage/csi-resizer:v2.3.0\"] | sort)"
check "no RoleBinding or ClusterRoleBinding names the node or agent ServiceAccount" \
  "[.[] | select(.kind | endswith(\"Binding\")) | .subjects[] | select(.name != \"pillar-controller\")] | length == 0"
J=$W/default.json

# The example StorageClasses.
check "three StorageClasses (nvmeof-tcp, iscsi, nfs) for $DRIVER, expandable, Immediate" \
  "[.[] | select(.kind == \"StorageClass\")] | (map(.parameters.protocol) | sort == [\"iscsi\",\"nfs\",\"nvmeof-tcp\"])
    and all(.provisioner == \"$DRIVER\" and .allowVolumeExpansion == true and .volumeBindingMode == \"Immediate\")"
check "StorageClasses: only pillar's parameters (agent, pool, protocol, acl, fsType), agent and pool set" \
  "[.[] | select(.kind == \"StorageClass\") | .parameters] | all((keys - [\"agent\",\"pool\",\"protocol\",\"acl\",\"fsType\"] | length == 0)
    and .agent != \"\" and .pool != \"\" and (.acl | IN(\"true\",\"false\")))"

# Every flag the chart passes to a pillar daemon is one the binary knows.
help_of() { # help_of BINARY: its --help, read once (a build relinking it meanwhile gets 2 more tries)
  local cache=$W/help-${1##*/} _
  [[ -s $cache ]] && { cat "$cache"; return 0; }
  for _ in 1 2 3; do
    "$1" --help >"$cache" 2>&1 && { cat "$cache"; return 0; }
    sleep 1
  done
  cat "$cache"
  rm -f "$cache"
  return 1
}
flags_known() { # flags_known LABEL: for the render in $J
  local c cname bin help f unknown
  for c in pillar-controller:src/controller/pillar-controller pillar-node:src/node/pillar-node \
    pillar-agent:src/agent/pillar-agent; do
    IFS=: read -r cname bin <<<"$c"
    if ! help=$(help_of "$PILLAR_BUILD/$bin"); then
      fail "$1$cname --help runs ($PILLAR_BUILD/$bin)" "$help"
      continue
    fi
    unknown=""
    for f in $(jq -r ".[] | select(.kind == \"Deployment\" or .kind == \"DaemonSet\") | .spec.template.spec.containers[]
        | select(.name == \"$cname\") | .args[] | sub(\"=.*\"; \"\")" "$J"); do
      grep -qE -- "(^|[ ,])$f( |,|$)" <<<"$help" || unknown+=" $f"
    done
    expect_eq "$1$cname knows every flag the chart passes (its --help)" "" "$unknown"
  done
}
J=$W/agent1.json
flags_known ""
J=$W/default.json
# ... and every flag passed to a CSI sidecar is one the built sidecar knows.
sidecar_flags_known() { # sidecar_flags_known LABEL
  local s help f unknown
  for s in $(jq -r '.[] | select(.kind == "Deployment") | .spec.template.spec.containers[] | select(.name | startswith("csi-")) | .name' "$J"); do
    if ! help=$(help_of "$CSI_BIN/$s"); then
      fail "$1$s --help runs ($CSI_BIN/$s)" "$help"
      continue
    fi
    unknown=""
    for f in $(jq -r ".[] | select(.kind == \"Deployment\") | .spec.template.spec.containers[] | select(.name == \"$s\")
        | .args[] | sub(\"=.*\"; \"\") | ltrimstr(\"-\") | ltrimstr(\"-\")" "$J"); do
      grep -qE -- "^ +(-[a-z], )?--?$f( |$)" <<<"$help" || unknown+=" $f"
    done
    expect_eq "$1$s knows every flag the chart passes (the built $s's --help)" "" "$unknown"
  done
}
sidecar_flags_known ""

# ---- the CRDs -------------------------------------------------------------------
crd_files() { (cd "$1" && ls -1 -- *.yaml 2>/dev/null); }
crds_equal() { # crds_equal DIR: the same files as deploy/crds, byte for byte
  [[ $(crd_files "$1") == "$(crd_files "$root/deploy/crds")" && -n $(crd_files "$1") ]] || return 1
  local f
  for f in $(crd_files "$root/deploy/crds"); do cmp -s "$1/$f" "$root/deploy/crds/$f" || return 1; done
}
if crds_equal "$chart/crds"; then
  ok "charts/pillar/crds equals deploy/crds byte for byte (scripts/sync-chart-crds.sh copies them)"
else
  fail "charts/pillar/crds equals deploy/crds byte for byte" "run scripts/sync-chart-crds.sh"
fi
helm template pillar "$chart" --namespace "$NS" --include-crds >"$W/with-crds.yaml" 2>"$W/err" ||
  fail "helm template --include-crds" "$(cat "$W/err")"
tojson "$W/with-crds.yaml" | jq -S '[.[] | select(.kind == "CustomResourceDefinition")] | sort_by(.metadata.name)' >"$W/crds-chart.json"
for f in "$root"/deploy/crds/*.yaml; do tojson "$f"; done | jq -S -s 'add | sort_by(.metadata.name)' >"$W/crds-deploy.json"
if [[ $(jq length "$W/crds-chart.json") == 4 ]] && cmp -s "$W/crds-chart.json" "$W/crds-deploy.json"; then
  ok "the CRDs helm installs are deploy/crds' objects (parsed)"
else
  fail "the CRDs helm installs are deploy/crds' objects (parsed)" "$(diff "$W/crds-deploy.json" "$W/crds-chart.json" | head -5)"
fi
# The comparison must be able to fail: a copy of the chart with one CRD changed.
mkdir -p "$W/chart-copy" && cp -r "$chart/crds" "$W/chart-copy/"
sed -i '0,/type: string/s//type: integer/' "$W/chart-copy/crds/pillarnodes.$DRIVER.yaml"
if crds_equal "$W/chart-copy/crds"; then
  fail "a changed CRD copy is caught"
else
  ok "a changed CRD copy is caught"
fi

# ---- render: non-default values ------------------------------------------------
if helm template store "$chart" --namespace "$NS2" -f "$W/custom.yaml" >"$W/custom-out.yaml" 2>"$W/err"; then
  ok "helm template with non-default values"
else
  fail "helm template with non-default values" "$(cat "$W/err")"
  finish
fi
tojson "$W/custom-out.yaml" >"$W/custom.json" || { fail "non-default render parses"; finish; }
J=$W/custom.json
D=$(obj Deployment store-pillar-controller)
N=$(obj DaemonSet store-pillar-node)
A=$(obj DaemonSet store-pillar-agent-storage-1)
KD=/var/snap/microk8s/common/var/lib/kubelet
check "custom: every namespaced object is in $NS2 (but the Events Role and its binding)" \
  "[.[] | select(.kind | IN(\"CSIDriver\",\"ClusterRole\",\"ClusterRoleBinding\",\"StorageClass\",\"VolumeSnapshotClass\") | not)
    | select(.metadata.name != \"store-pillar-controller-events\") | .metadata.namespace] | all(. == \"$NS2\")"
check "custom: 3 replicas, the snapshotter as a fourth sidecar" \
  "$D | (.spec.replicas == 3) and ([.spec.template.spec.containers[].name] ==
    [\"pillar-controller\",\"csi-provisioner\",\"csi-attacher\",\"csi-resizer\",\"csi-snapshotter\"])"
check "custom: csi-snapshotter v8.7.0 on the socket with leader election, and its ClusterRole bound" \
  "($(sidecar csi-snapshotter) | .image == \"registry.k8s.io/sig-storage/csi-snapshotter:v8.7.0\"
      and (.args | index(\"--csi-address=/csi/csi.sock\") != null and index(\"--leader-election\") != null))
    and ([$(obj ClusterRoleBinding store-pillar-snapshotter) | .roleRef.name] == [\"store-pillar-snapshotter\"])"
check "custom: controller.leaderElection 60/40/5 on the controller and its four sidecars" \
  "[$(lease_args "$D")] == ([[\"--leader-election-lease-duration=60\", \"--leader-election-renew-deadline=40\", \"--leader-election-retry-period=5\"]]
    + [range(4) | [\"--leader-election-lease-duration=60s\", \"--leader-election-renew-deadline=40s\", \"--leader-election-retry-period=5s\"]])"
check "custom: pool flags --pool=tank/k8s=zfs --pool=vg0=lvm-thin:thin0 --pool=scratch=file:/srv/pillar" \
  "[$A | $ag | .args[] | select(startswith(\"--pool\"))] ==
    [\"--pool=tank/k8s=zfs\", \"--pool=vg0=lvm-thin:thin0\", \"--pool=scratch=file:/srv/pillar\"]"
check "custom: the file pool's directory mounted from the host" "$(hostpath "$A" pillar-agent /srv/pillar)"
check "custom: without nfs, no NFS mounts and --protocols=nvmeof-tcp,iscsi" \
  "$A | .spec.template.spec | ([.volumes[].hostPath.path] | (index(\"/proc/fs/nfsd\") == null) and (index(\"/etc/exports.d\") == null))
    and (.containers[0].args | index(\"--protocols=nvmeof-tcp,iscsi\") != null)"
check "custom: --listen=0.0.0.0:9700 and its port declared" \
  "$A | $ag | (.args | index(\"--listen=0.0.0.0:9700\") != null) and (.ports == [{name: \"grpc\", containerPort: 9700, hostPort: 9700, protocol: \"TCP\"},
      {name: \"metrics\", containerPort: 9651, hostPort: 9651, protocol: \"TCP\"}])"
check "custom: one agent DaemonSet per entry with a node (none for outside-1), each pinned, on its entry's port" \
  "([.[] | select(.kind == \"DaemonSet\" and (.metadata.name | contains(\"agent\"))) | .metadata.name] | sort) ==
      [\"store-pillar-agent-storage-1\", \"store-pillar-agent-storage-2\"]
    and ($(obj DaemonSet store-pillar-agent-storage-2) | .spec.template.spec | .nodeSelector[\"kubernetes.io/hostname\"] == \"storage-node-2\"
      and (.containers[0].args | index(\"--listen=0.0.0.0:9701\") != null))
    and ($A | .spec.template.spec.nodeSelector[\"kubernetes.io/hostname\"] == \"storage-node-1\")"
for a in storage-1 storage-2; do
  check "custom: metrics on agent $a's DaemonSet (--metrics-address, port metrics 9651)" \
    "$(metrics_pod "$(obj DaemonSet "store-pillar-agent-$a")" pillar-agent 9651 true)"
done
check "custom: one agent metrics Service selects both agents' pods" \
  "$(metrics_svc store-pillar-agent-metrics 9651 "$A") and ($(metrics_svc store-pillar-agent-metrics 9651 "$(obj DaemonSet store-pillar-agent-storage-2)"))"
check "custom: kubelet dir $KD mounted Bidirectional" \
  "$(hostpath "$N" pillar-node $KD) and ($N | $nd | [.volumeMounts[] | select(.mountPath == \"$KD\") | .mountPropagation] == [\"Bidirectional\"])"
check "custom: registrar's path and the plugin dirs under $KD" \
  "$N | .spec.template.spec | ([.containers[] | select(.name == \"node-driver-registrar\") | .args[]
      | select(. == \"--kubelet-registration-path=$KD/plugins/$DRIVER/csi.sock\")] | length == 1)
    and ([.volumes[].hostPath.path] | index(\"$KD/plugins/$DRIVER\") != null and index(\"$KD/plugins_registry\") != null)
    and ([.volumes[].hostPath.path | select(. != null) | select(startswith(\"/var/lib/kubelet\"))] | length == 0)"
node_sa=$(jq -r "$N | .spec.template.spec.serviceAccountName" "$J")
expect_eq "custom: the node ServiceAccount is the value" pillar-node-plugin "$node_sa"
check "custom: --node-service-account=$NS2:pillar-node-plugin matches it, and it is rendered" \
  "($D | $ctl | .args | index(\"--node-service-account=$NS2:pillar-node-plugin\") != null)
    and ([$(obj ServiceAccount pillar-node-plugin) | .metadata.namespace] == [\"$NS2\"])"
check "custom: registry on 9601: Service, container port, controller and node flags" \
  "($(obj Service store-pillar-controller) | .spec.ports[0].port == 9601)
    and ($D | $ctl | (.args | index(\"--registry-listen=0.0.0.0:9601\") != null) and .ports[0].containerPort == 9601)
    and ($N | $nd | .args | index(\"--registry-address=store-pillar-controller.$NS2.svc:9601\") != null)"
check "custom: --agent flags from controller.agents (IPv6 in brackets, TLS names)" \
  "[$D | $ctl | .args[] | select(startswith(\"--agent=\"))] ==
    [\"--agent=storage-1=10.0.0.5:9700@agent.storage.example\", \"--agent=storage-2=[fd00::5]:9701@storage-2.example\",
     \"--agent=outside-1=10.0.0.6:9700@agent.storage.example\"]"
check "custom: logLevel debug: --log-level=debug for pillar, --v=5 for the sidecars" \
  "([.[] | select(.kind == \"Deployment\" or .kind == \"DaemonSet\") | .spec.template.spec.containers[] | .args[]
      | select(startswith(\"--log-level=\"))] | unique == [\"--log-level=debug\"])
    and ([.[] | select(.kind == \"Deployment\" or .kind == \"DaemonSet\") | .spec.template.spec.containers[] | .args[]
      | select(startswith(\"--v=\"))] | unique == [\"--v=5\"])"
check "custom: node tolerations and nodeSelector from the values" \
  "$N | .spec.template.spec | (has(\"tolerations\") | not) and .nodeSelector == {\"pillar-csi.bhyoo.com/consumer\": \"true\"}"
check "custom: StorageClasses from the values (xfs, default class, extra parameters, NFS root owner and mode, acl false, Retain)" \
  "($(obj StorageClass pillar-fast) | .parameters == {agent: \"storage-1\", pool: \"tank/k8s\", protocol: \"nvmeof-tcp\",
      acl: \"true\", fsType: \"xfs\", inCapsuleDataSize: \"8192\", \"backend.compression\": \"lz4\"}
      and .metadata.annotations[\"storageclass.kubernetes.io/is-default-class\"] == \"true\")
    and ($(obj StorageClass pillar-shared) | .parameters == {agent: \"storage-1\", pool: \"scratch\", protocol: \"nfs\", acl: \"false\",
      nfsRootOwner: \"1000:1000\", nfsRootMode: \"2770\"}
      and .reclaimPolicy == \"Retain\")"
# certManager mode.
check "certManager: a self-signed Issuer, a CA Certificate and a CA Issuer" \
  "([$(obj Issuer store-pillar-selfsigned) | .spec] == [{selfSigned: {}}])
    and ([$(obj Certificate store-pillar-ca) | .spec | .isCA and .issuerRef.name == \"store-pillar-selfsigned\"] == [true])
    and ([$(obj Issuer store-pillar-ca) | .spec.ca.secretName] == [\"store-pillar-ca\"])"
check "certManager: one Certificate per role and per agent from the CA, writing the Secrets the pods mount (outside-1's for an agent run elsewhere)" \
  "([.[] | select(.kind == \"Certificate\" and .spec.issuerRef.name == \"store-pillar-ca\") | .spec.secretName] | sort) as \$issued |
   ([.[] | select(.kind == \"Deployment\" or .kind == \"DaemonSet\") | .spec.template.spec.volumes[] | select(.secret) | .secret.secretName] | unique) as \$mounted |
   \$issued == [\"pillar-agent-tls-outside-1\",\"pillar-agent-tls-storage-1\",\"pillar-agent-tls-storage-2\",\"pillar-controller-tls\",\"pillar-node-tls\",\"pillar-registry-tls\"]
   and \$mounted == (\$issued - [\"pillar-agent-tls-outside-1\"])"
check "certManager: the registry certificate names the Service's DNS names; the agent's names tls.agentServerName" \
  "([$(obj Certificate store-pillar-registry) | .spec.dnsNames[]] | index(\"store-pillar-controller.$NS2.svc\") != null
      and index(\"store-pillar-controller.$NS2.svc.cluster.local\") != null)
    and ([$(obj Certificate store-pillar-agent-storage-1) | .spec.dnsNames] == [[\"agent.storage.example\"]])
    and ([$(obj Certificate store-pillar-agent-storage-2) | .spec.dnsNames] == [[\"storage-2.example\"]])
    and ([$(obj Certificate store-pillar-agent-storage-1) | .spec.usages[]] | index(\"server auth\") != null)
    and ([$(obj Certificate store-pillar-node) | .spec.usages[]] | index(\"client auth\") != null)"
check "certManager: each client certificate carries its role URI (docs/security.md); the registry's none" \
  "([$(obj Certificate store-pillar-controller) | .spec.uris] == [[\"pillar-csi://controller/store-pillar-controller\"]])
    and ([$(obj Certificate store-pillar-node) | .spec.uris] == [[\"pillar-csi://node/store-pillar-node\"]])
    and ([$(obj Certificate store-pillar-agent-storage-1) | .spec.uris] == [[\"pillar-csi://agent/storage-1\"]])
    and ([$(obj Certificate store-pillar-agent-storage-2) | .spec.uris] == [[\"pillar-csi://agent/storage-2\"]])
    and ([$(obj Certificate store-pillar-agent-outside-1) | .spec.uris] == [[\"pillar-csi://agent/outside-1\"]])
    and ([$(obj Certificate store-pillar-registry) | .spec.uris] == [null])"
flags_known "custom: "
sidecar_flags_known "custom: "

# Smaller variants: the insecure registry, no StorageClasses, no agent.
if helm template pillar "$chart" --namespace "$NS" --set registry.insecure=true \
  --set storageClasses.create=false --set agent.enabled=false >"$W/insecure.yaml" 2>"$W/err" &&
  tojson "$W/insecure.yaml" >"$W/insecure.json"; then
  J=$W/insecure.json
  check "registry.insecure: --registry-insecure on controller and node, no registry TLS Secrets" \
    "([.[] | select(.kind == \"Deployment\" or .kind == \"DaemonSet\") | .spec.template.spec.containers[]
        | select(.name == \"pillar-controller\" or .name == \"pillar-node\") | .args | index(\"--registry-insecure\") != null] == [true, true])
      and ([.[] | .spec.template.spec.volumes[]? | .secret.secretName | select(. != null)] == [\"pillar-controller-tls\"])"
  check "storageClasses.create=false, agent.enabled=false: no StorageClass, no agent" \
    "[.[] | select(.kind == \"StorageClass\" or (.kind == \"DaemonSet\" and (.metadata.name | endswith(\"agent\"))))] | length == 0"
else
  fail "helm template with registry.insecure, no StorageClasses, no agent" "$(cat "$W/err")"
fi

# registry.address: the node plugins dial it, and still check the registry
# certificate against the Service's name.
if helm template pillar "$chart" --namespace "$NS" --set registry.address=10.244.1.7:9600 \
  >"$W/regaddr.yaml" 2>"$W/err" && tojson "$W/regaddr.yaml" >"$W/regaddr.json"; then
  J=$W/regaddr.json
  check "registry.address: --registry-address is it, --registry-tls-server-name the Service's name" \
    "$(obj DaemonSet pillar-node) | $nd | [.args[] | select(startswith(\"--registry-address=\") or startswith(\"--registry-tls-server-name=\"))] ==
      [\"--registry-address=10.244.1.7:9600\", \"--registry-tls-server-name=pillar-controller.$NS.svc\"]"
else
  fail "helm template with registry.address" "$(cat "$W/err")"
fi

# In-band authentication: classes with auth.mode chap name their Secret in the
# CSI secret parameters, and the controller may get exactly those Secrets.
AUTH_CLASSES='[{"name":"chap-iscsi","protocol":"iscsi","auth":{"mode":"chap","secretName":"pillar-chap"},"parameters":{"import":"true"}},
  {"name":"chap-nvme","protocol":"nvmeof-tcp","auth":{"mode":"chap","secretName":"nvme-keys","secretNamespace":"keys"}},
  {"name":"chap-iscsi-2","protocol":"iscsi","auth":{"mode":"chap","secretName":"pillar-chap"}},
  {"name":"plain","protocol":"iscsi","auth":{"mode":"none"}}]'
if helm template pillar "$chart" --namespace "$NS" --set-json "storageClasses.classes=$AUTH_CLASSES" >"$W/auth.yaml" 2>"$W/err" &&
  tojson "$W/auth.yaml" >"$W/auth.json"; then
  J=$W/auth.json
  secret_params() { # NAME NAMESPACE: the six CSI secret parameters as a jq object
    printf '{"csi.storage.k8s.io/provisioner-secret-name": "%s", "csi.storage.k8s.io/provisioner-secret-namespace": "%s",
      "csi.storage.k8s.io/controller-publish-secret-name": "%s", "csi.storage.k8s.io/controller-publish-secret-namespace": "%s",
      "csi.storage.k8s.io/node-stage-secret-name": "%s", "csi.storage.k8s.io/node-stage-secret-namespace": "%s"}' \
      "$1" "$2" "$1" "$2" "$1" "$2"
  }
  check "auth chap: auth and the provisioner, controller-publish and node-stage Secret in the class (release namespace by default), import passed on" \
    "$(obj StorageClass chap-iscsi) | .parameters == ({agent: \"storage-1\", pool: \"local\", protocol: \"iscsi\", acl: \"true\",
      auth: \"chap\", import: \"true\"} + $(secret_params pillar-chap "$NS"))"
  check "auth chap: a Secret in another namespace (secretNamespace keys)" \
    "$(obj StorageClass chap-nvme) | .parameters == ({agent: \"storage-1\", pool: \"local\", protocol: \"nvmeof-tcp\", acl: \"true\",
      auth: \"chap\"} + $(secret_params nvme-keys keys))"
  check "auth none: no auth parameter, no Secret parameter" \
    "$(obj StorageClass plain) | .parameters == {agent: \"storage-1\", pool: \"local\", protocol: \"iscsi\", acl: \"true\"}"
  check "auth: one Role per Secret namespace, get on exactly the named Secrets, bound to the controller's ServiceAccount only" \
    "([.[] | select(.kind == \"Role\" and (.metadata.name | endswith(\"-auth-secrets\"))) | {ns: .metadata.namespace, rules}] | sort_by(.ns)) ==
      [{ns: \"keys\", rules: [{apiGroups: [\"\"], resources: [\"secrets\"], resourceNames: [\"nvme-keys\"], verbs: [\"get\"]}]},
       {ns: \"$NS\", rules: [{apiGroups: [\"\"], resources: [\"secrets\"], resourceNames: [\"pillar-chap\"], verbs: [\"get\"]}]}]
    and ([.[] | select(.kind == \"RoleBinding\" and (.metadata.name | endswith(\"-auth-secrets\")))
      | {ns: .metadata.namespace, subjects, role: .roleRef.name}] | sort_by(.ns)) ==
      [{ns: \"keys\", subjects: [{kind: \"ServiceAccount\", name: \"pillar-controller\", namespace: \"$NS\"}], role: \"pillar-auth-secrets\"},
       {ns: \"$NS\", subjects: [{kind: \"ServiceAccount\", name: \"pillar-controller\", namespace: \"$NS\"}], role: \"pillar-auth-secrets\"}]"
  check "default render: no Secret is readable (no auth-secrets Role)" \
    "[.[] | select(.metadata.name | endswith(\"-auth-secrets\"))] | length == 0" "$W/default.json"
else
  fail "helm template with auth classes" "$(cat "$W/err")"
fi

# ---- metrics: ServiceMonitors, the dashboard, metrics off -------------------------
# The dashboard may name only metrics the daemons export (histograms with
# their _bucket, _sum and _count series), and names each of them.
DAEMON_METRICS="pillar_controller_volumes pillar_controller_reconcile_duration_seconds
  pillar_controller_resync_duration_seconds pillar_controller_repairs_total pillar_controller_agent_calls_total
  pillar_controller_agent_call_duration_seconds pillar_controller_agents pillar_controller_agents_connected
  pillar_controller_leader pillar_controller_store_requests_total pillar_controller_store_request_duration_seconds
  pillar_agent_exports pillar_agent_target_operations_total pillar_agent_pool_size_bytes pillar_agent_pool_available_bytes
  pillar_agent_pool_provisioned_bytes pillar_agent_fencing_refusals_total pillar_agent_boot_epoch_info
  pillar_agent_rpc_duration_seconds pillar_node_csi_operations_seconds pillar_node_selfheal_actions_total pillar_node_sessions"
# dashboard_metrics FILE: the problems of a dashboard, one a line (nothing: none)
dashboard_metrics() {
  local used m base
  used=$(jq -r '[.. | objects | .expr? // empty] | .[]' "$1" | grep -oE 'pillar_[a-z_]+' | sort -u) ||
    { echo "no expression names a pillar_ metric"; return; }
  for m in $used; do
    base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$m")
    grep -qw -- "$m" <<<"$DAEMON_METRICS" || grep -qw -- "$base" <<<"$DAEMON_METRICS" || echo "unknown metric $m"
  done
  for m in $DAEMON_METRICS; do
    grep -qE -- "^${m}(_bucket|_sum|_count)?\$" <<<"$used" || echo "not shown: $m"
  done
}
dash=$chart/dashboards/pillar.json
if cmp -s "$dash" "$root/deploy/grafana/pillar-dashboard.json"; then
  ok "deploy/grafana/pillar-dashboard.json equals charts/pillar/dashboards/pillar.json byte for byte"
else
  fail "deploy/grafana/pillar-dashboard.json equals charts/pillar/dashboards/pillar.json byte for byte" \
    "copy charts/pillar/dashboards/pillar.json there (helm reads only the chart's copy)"
fi
check "dashboard: a datasource variable (prometheus), schemaVersion >= 36, every panel on it, unique panel ids" \
  '([.templating.list[] | select(.name == "datasource") | [.type, .query]] == [["datasource", "prometheus"]])
    and .schemaVersion >= 36
    and ([.panels[] | select(.type != "row") | .datasource.uid, (.targets[].datasource.uid)] | unique == ["${datasource}"])
    and ([.panels[].id] | length == (unique | length))' "$dash"
expect_eq "dashboard: only metric names the daemons export, and every one of them" "" "$(dashboard_metrics "$dash")"
sed 's/pillar_controller_repairs_total/pillar_controller_repair_total/' "$dash" >"$W/dash-typo.json"
if [[ -z $(dashboard_metrics "$W/dash-typo.json") ]]; then
  fail "a misspelt metric name in the dashboard is caught"
else
  ok "a misspelt metric name in the dashboard is caught"
fi

cat >"$W/monitoring.yaml" <<'YAML'
metrics:
  serviceMonitor:
    enabled: true
    interval: 1m
    labels: {release: kube-prometheus-stack}
  grafanaDashboard:
    enabled: true
controller:
  agents:
    - {name: storage-1, address: 10.0.0.5, port: 9500, node: storage-1}
    - {name: storage-2, address: 10.0.0.6, port: 9500, node: storage-2}
YAML
if helm template pillar "$chart" --namespace "$NS" -f "$W/monitoring.yaml" >"$W/monitoring-out.yaml" 2>"$W/err" &&
  tojson "$W/monitoring-out.yaml" >"$W/monitoring.json"; then
  J=$W/monitoring.json
  check "serviceMonitor.enabled: one ServiceMonitor per component (controller, node, agent)" \
    '[.[] | select(.kind == "ServiceMonitor") | [.apiVersion, .metadata.name]] | sort ==
      [["monitoring.coreos.com/v1", "pillar-agent"], ["monitoring.coreos.com/v1", "pillar-controller"], ["monitoring.coreos.com/v1", "pillar-node"]]'
  for c in controller node agent; do
    check "ServiceMonitor pillar-$c: port metrics, /metrics, every 1m, label release, selecting Service pillar-$c-metrics only" \
      "($(obj ServiceMonitor "pillar-$c")) as \$sm | [.[] | select(.kind == \"Service\" and .metadata.namespace == \"$NS\")
        | select(.metadata.labels as \$l | \$sm.spec.selector.matchLabels | to_entries | all(\$l[.key] == .value)) | .metadata.name]
        == [\"pillar-$c-metrics\"]
      and \$sm.spec.endpoints == [{port: \"metrics\", path: \"/metrics\", scheme: \"http\", interval: \"1m\"}]
      and \$sm.spec.namespaceSelector == {matchNames: [\"$NS\"]} and \$sm.metadata.labels.release == \"kube-prometheus-stack\""
  done
  check "metrics: both agent groups' DaemonSets carry the flag and the port" \
    "[.[] | select(.kind == \"DaemonSet\" and (.metadata.name | startswith(\"pillar-agent-\"))) | .spec.template.spec.containers[0]
      | (.args | index(\"--metrics-address=0.0.0.0:9651\") != null) and ([.ports[].name] == [\"grpc\", \"metrics\"])] == [true, true]"
  check "grafanaDashboard.enabled: ConfigMap pillar-grafana-dashboard labelled grafana_dashboard=1, with the chart's dashboard" \
    "[$(obj ConfigMap pillar-grafana-dashboard) | .metadata.labels.grafana_dashboard, (.data | keys)] == [\"1\", [\"pillar.json\"]]"
  jq -r "$(obj ConfigMap pillar-grafana-dashboard) | .data[\"pillar.json\"]" "$J" >"$W/dash-cm.json"
  check "the ConfigMap's dashboard is valid JSON naming pillar_controller_repairs_total, the same as the chart's file" \
    "(.[0] == .[1]) and (.[0] | [.. | objects | .expr? // empty] | any(contains(\"pillar_controller_repairs_total\")))" \
    <(jq -s . "$W/dash-cm.json" "$dash" 2>/dev/null || echo '[]')
else
  fail "helm template with ServiceMonitors and the dashboard" "$(cat "$W/err")"
fi
if helm template pillar "$chart" --namespace "$NS" -f "$W/monitoring.yaml" --set metrics.enabled=false \
  >"$W/nometrics.yaml" 2>"$W/err" && tojson "$W/nometrics.yaml" >"$W/nometrics.json"; then
  J=$W/nometrics.json
  check "metrics.enabled=false: no --metrics-address, no port named metrics, no metrics Service, ServiceMonitor or ConfigMap" \
    "([.[] | select(.kind == \"Deployment\" or .kind == \"DaemonSet\") | .spec.template.spec.containers[]
        | (.args[] | select(startswith(\"--metrics-address\"))), (.ports[]? | select(.name == \"metrics\"))] | length == 0)
      and ([.[] | select((.metadata.name | endswith(\"-metrics\")) or .kind == \"ServiceMonitor\" or .kind == \"ConfigMap\")] | length == 0)
      and ([.[] | select(.kind == \"DaemonSet\")] | length == 3)"
  check "metrics.enabled=false: the node plugin declares no ports at all" \
    "$(obj DaemonSet pillar-node) | .spec.template.spec.containers[0] | has(\"ports\") | not"
else
  fail "helm template with metrics.enabled=false" "$(cat "$W/err")"
fi
# Ports that would collide are refused by the chart.
refused_by_chart() { # refused_by_chart NAME MESSAGE-TEXT HELM-ARGS...
  local name=$1 want=$2
  shift 2
  if helm template pillar "$chart" --namespace "$NS" "$@" >"$W/refused.out" 2>&1; then
    fail "refused: $name" "accepted"
  elif ! grep -qF -- "$want" "$W/refused.out"; then
    fail "refused: $name" "the message does not say $want: $(head -3 "$W/refused.out")"
  else
    ok "refused: $name"
  fi
}
refused_by_chart "controller.metrics.port = registry.port" "controller.metrics.port 9600 is registry.port" \
  --set controller.metrics.port=9600
refused_by_chart "agent.metrics.port = node.metrics.port" "agent.metrics.port 9652 is node.metrics.port" \
  --set agent.metrics.port=9652
refused_by_chart "agent.metrics.port = an agent's port" "agent.metrics.port 9500 is agent storage-1's port" \
  --set agent.metrics.port=9500 --set-json "controller.agents=$AGENT1"

# ---- values the schema refuses ---------------------------------------------------
refused() { # refused NAME FIELD-TEXT HELM-ARGS...: helm template fails, naming the field
  local name=$1 want=$2
  shift 2
  if helm template pillar "$chart" --namespace "$NS" "$@" >"$W/refused.out" 2>&1; then
    fail "refused: $name" "accepted"
  elif ! grep -q "values don't meet the specifications of the schema" "$W/refused.out"; then
    fail "refused: $name" "failed, but not by the schema: $(head -3 "$W/refused.out")"
  elif ! grep -qF -- "$want" "$W/refused.out"; then
    fail "refused: $name" "the message does not name $want: $(head -5 "$W/refused.out")"
  else
    ok "refused: $name ($(grep -m1 -F -- "$want" "$W/refused.out" | sed 's/^[[:space:]]*//' | cut -c1-90))"
  fi
}
refused "controller.replicas=0" "/controller/replicas" --set controller.replicas=0
refused "controller.replicas as a string" "/controller/replicas" --set-string controller.replicas=two
refused "controller.sidecars.attacher.workers=0" "/controller/sidecars/attacher/workers" \
  --set controller.sidecars.attacher.workers=0
refused "controller.sidecars.provisioner.kubeApiQps=0" "/controller/sidecars/provisioner/kubeApiQps" \
  --set controller.sidecars.provisioner.kubeApiQps=0
refused "logLevel=verbose" "/logLevel" --set logLevel=verbose
refused "node.logLevel=trace" "/node/logLevel" --set node.logLevel=trace
refused "an unknown top-level key" "foo" --set foo=bar
refused "a misspelt nested key (controller.replica)" "replica" --set controller.replica=2
refused "registry.insecure=maybe" "/registry/insecure" --set registry.insecure=maybe
refused "registry.port=70000" "/registry/port" --set registry.port=70000
refused "registry.address=no-port" "/registry/address" --set registry.address=no-port
refused "tls.mode=vault" "/tls/mode" --set tls.mode=vault
refused "a pool without a name" "name" --set-json 'agent.pools=[{"type":"zfs"}]'
refused "a pool of an unknown type" "/agent/pools/0/type" --set-json 'agent.pools=[{"name":"tank","type":"btrfs"}]'
refused "an lvm-thin pool without thinPool" "thinPool" --set-json 'agent.pools=[{"name":"vg0","type":"lvm-thin"}]'
refused "a file pool with a relative path" "/agent/pools/0/path" --set-json 'agent.pools=[{"name":"s","type":"file","path":"srv"}]'
refused "a zfs pool with a path" "path" --set-json 'agent.pools=[{"name":"tank","type":"zfs","path":"/srv"}]'
refused "a pool name with a space" "/agent/pools/0/name" --set-json 'agent.pools=[{"name":"my pool","type":"zfs"}]'
refused "a pool list as a string" "/agent/pools" --set agent.pools=tank
refused "no pools" "/agent/pools" --set-json 'agent.pools=[]'
refused "agent.protocols with fc" "/agent/protocols/0" --set-json 'agent.protocols=["fc"]'
refused "a StorageClass protocol fc" "/storageClasses/classes/0/protocol" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"fc"}]'
refused "a StorageClass parameter pillar does not know" "/storageClasses/classes/0/parameters" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"nfs","parameters":{"replicas":"3"}}]'
refused "a StorageClass fsType btrfs" "/storageClasses/classes/0/fsType" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"iscsi","fsType":"btrfs"}]'
refused "auth chap without a secretName" "secretName" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"iscsi","auth":{"mode":"chap"}}]'
refused "auth mode kerberos" "/storageClasses/classes/0/auth/mode" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"iscsi","auth":{"mode":"kerberos"}}]'
refused "auth chap on NFS" "/storageClasses/classes/0/auth/mode" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"nfs","auth":{"mode":"chap","secretName":"s"}}]'
refused "auth chap with acl false" "/storageClasses/classes/0/acl" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"iscsi","acl":false,"auth":{"mode":"chap","secretName":"s"}}]'
refused "auth none with a secretName" "/storageClasses/classes/0/auth/secretName" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"iscsi","auth":{"mode":"none","secretName":"s"}}]'
# (helm's validator names this one by a wrong path, so the message is matched by the property)
refused "auth chap and a Secret parameter of its own" "invalid propertyName 'csi.storage.k8s.io/node-stage-secret-name'" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"iscsi","auth":{"mode":"chap","secretName":"s"},"parameters":{"csi.storage.k8s.io/node-stage-secret-name":"t"}}]'
refused "auth as a plain parameter (use the class's auth)" "/storageClasses/classes/0/parameters" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"iscsi","parameters":{"auth":"chap"}}]'
refused "a Secret namespace that is no DNS label" "/storageClasses/classes/0/auth/secretNamespace" \
  --set-json 'storageClasses.classes=[{"name":"x","protocol":"iscsi","auth":{"mode":"chap","secretName":"s","secretNamespace":"Keys_1"}}]'
refused "an agent entry without a port" "port" --set-json 'controller.agents=[{"name":"storage-1","address":"10.0.0.5"}]'
refused "an agent's node that is no host name" "/controller/agents/0/node" \
  --set-json 'controller.agents=[{"name":"storage-1","address":"10.0.0.5","port":9500,"node":"Storage_1"}]'
refused "an agent name longer than a label value" "/controller/agents/0/name" \
  --set-json "controller.agents=[{\"name\":\"$(printf 'a%.0s' {1..64})\",\"address\":\"10.0.0.5\",\"port\":9500}]"
refused "a pull policy Sometimes" "/controller/image/pullPolicy" --set controller.image.pullPolicy=Sometimes
refused "a relative kubeletDir" "/kubeletDir" --set kubeletDir=var/lib/kubelet
refused "controller.metrics.port as a string" "/controller/metrics/port" --set-string controller.metrics.port=metrics
refused "agent.metrics.port=0" "/agent/metrics/port" --set agent.metrics.port=0
refused "metrics.enabled=maybe" "/metrics/enabled" --set metrics.enabled=maybe
refused "metrics.serviceMonitor.interval=soon" "/metrics/serviceMonitor/interval" --set metrics.serviceMonitor.interval=soon
refused "a misspelt metrics key (metrics.serviceMonitors)" "serviceMonitors" --set metrics.serviceMonitors.enabled=true
refused "a dashboard label that is no string" "/metrics/grafanaDashboard/labels/grafana_dashboard" \
  --set-json 'metrics.grafanaDashboard.labels={"grafana_dashboard":1}'

# ---- on the real API server --------------------------------------------------------
# The node plugin and the agent are privileged containers, which a real
# cluster's API server allows (kubeadm and every distribution run it with
# --allow-privileged=true); lib.sh leaves the flag at its default, false.
K8S_APISERVER_ARGS="${K8S_APISERVER_ARGS:-} --allow-privileged=true"
k8s_up "$W" || { fail "k8s_up"; finish; }
k8s_start_controller_manager "$W" || { fail "kube-controller-manager"; finish; }

# CRDs first (as helm does), Established, then everything else.
if kubectl apply --server-side --field-manager=pillar-chart-test -f "$chart/crds/" >"$W/apply.out" 2>&1; then
  ok "the chart's CRDs accepted by server-side apply"
else
  fail "the chart's CRDs accepted by server-side apply" "$(cat "$W/apply.out")"
fi
for crd in pillarvolumestates pillaragents pillarnodes pillarsnapshots; do
  if kubectl wait --for=condition=Established "crd/$crd.$DRIVER" --timeout=60s >/dev/null 2>&1; then
    ok "$crd established"
  else
    fail "$crd established"
  fi
done
kubectl create namespace "$NS" >/dev/null 2>&1 || fail "namespace $NS created"
if kubectl apply --server-side --field-manager=pillar-chart-test -f "$W/default.yaml" >"$W/apply.out" 2>&1; then
  ok "every object of the default render accepted by server-side apply ($(grep -c . "$W/apply.out") objects)"
else
  fail "every object of the default render accepted by server-side apply" "$(grep -v 'serverside-applied' "$W/apply.out" | head -10)"
fi
missing=""
while read -r kind name ns; do
  if [[ $ns == - ]]; then
    kubectl get "$kind" "$name" >/dev/null 2>&1 || missing+=" $kind/$name"
  else
    kubectl -n "$ns" get "$kind" "$name" >/dev/null 2>&1 || missing+=" $ns/$kind/$name"
  fi
done < <(jq -r '.[] | "\(.kind) \(.metadata.name) \(.metadata.namespace // "-")"' "$W/default.json")
expect_eq "every rendered object is on the server" "" "$missing"
if kubectl apply --server-side --field-manager=pillar-chart-test -f "$W/default.yaml" >"$W/apply2.out" 2>&1 &&
  ! grep -qv 'serverside-applied' "$W/apply2.out"; then
  ok "applying the render again is accepted (no conflict)"
else
  fail "applying the render again is accepted" "$(head -5 "$W/apply2.out")"
fi
check "the CSIDriver on the server has every field as rendered" \
  "(.[-1].spec) as \$server | [$(obj CSIDriver $DRIVER)][0].spec | to_entries | all(\$server[.key] == .value)" \
  <(jq -s '.[1] + [.[0]]' <(kubectl get csidriver $DRIVER -o json) "$W/default.json")

# The Deployment controller makes the controller's pods: their specs pass the
# pod admission chain (ServiceAccount, priority class, projected volumes).
# No kubelet and no scheduler run here, so they stay Pending.
pods_pending() {
  [[ $(kubectl -n "$NS" get pods -l app.kubernetes.io/component=controller \
    -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' 2>/dev/null | grep -c '^Pending$') == "$1" ]]
}
if took=$(wait_for 60 pods_pending 2); then
  ok "the Deployment's 2 controller pods are created (Pending: no kubelet here) in $took s"
else
  fail "the Deployment's 2 controller pods are created" \
    "$(kubectl -n "$NS" get rs,pods -o wide 2>&1 | head; kubectl -n "$NS" get events 2>&1 | tail -5)"
fi
check "a controller pod runs as the chart's non-root user with the ServiceAccount's token" \
  ".items[0].spec | .serviceAccountName == \"pillar-controller\" and .securityContext.runAsUser == 65532
    and ([.volumes[] | select(.projected.sources[]?.serviceAccountToken)] | length >= 1)" \
  <(kubectl -n "$NS" get pods -l app.kubernetes.io/component=controller -o json)
# The one-agent render's agent DaemonSet, pinned to the node storage-1.
if jq "$(obj DaemonSet pillar-agent-storage-1)" "$W/agent1.json" >"$W/agent-ds.json" &&
  kubectl apply --server-side --field-manager=pillar-chart-test -f "$W/agent-ds.json" >"$W/err" 2>&1; then
  ok "the agent DaemonSet pillar-agent-storage-1 accepted by server-side apply"
else
  fail "the agent DaemonSet pillar-agent-storage-1 accepted by server-side apply" "$(cat "$W/err")"
fi
# A Node labelled as a storage node: both DaemonSets want a pod on it.
kubectl apply -f - >/dev/null 2>"$W/err" <<YAML || fail "a Node object storage-1" "$(cat "$W/err")"
apiVersion: v1
kind: Node
metadata:
  name: storage-1
  labels:
    pillar-csi.bhyoo.com/storage-node: "true"
    kubernetes.io/hostname: storage-1
YAML
ds_wants() { [[ $(kubectl -n "$NS" get ds "$1" -o jsonpath='{.status.desiredNumberScheduled}' 2>/dev/null) == 1 ]]; }
for ds in pillar-node pillar-agent-storage-1; do
  if took=$(wait_for 60 ds_wants "$ds"); then
    ok "DaemonSet $ds wants one pod on the storage node ($took s)"
  else
    fail "DaemonSet $ds wants one pod on the storage node" "$(kubectl -n "$NS" get ds "$ds" -o jsonpath='{.status}' 2>&1)"
  fi
done

# RBAC, as each ServiceAccount.
can() { # can SA VERB RESOURCE [ARGS...]: prints yes or no
  local sa=$1
  shift
  kubectl auth can-i "$@" --as="system:serviceaccount:$NS:$sa" 2>/dev/null
}
allowed() { local r; r=$(can "$@"); if [[ $r == yes ]]; then ok "$1 may $2 $3 ${*:4}"; else fail "$1 may $2 $3 ${*:4}" "$r"; fi; }
denied() { local r; r=$(can "$@"); if [[ $r == no ]]; then ok "$1 may not $2 $3 ${*:4}"; else fail "$1 may not $2 $3 ${*:4}" "${r:-error}"; fi; }
allowed pillar-controller create tokenreviews.authentication.k8s.io
allowed pillar-controller patch pillarvolumestates.$DRIVER --subresource=status
allowed pillar-controller watch pillarnodes.$DRIVER
allowed pillar-controller delete pillarvolumestates.$DRIVER
allowed pillar-controller update pillaragents.$DRIVER --subresource=status
allowed pillar-controller update leases.coordination.k8s.io -n "$NS"
allowed pillar-controller create leases.coordination.k8s.io -n "$NS"
allowed pillar-controller create events -n default
allowed pillar-controller create persistentvolumes
allowed pillar-controller update persistentvolumeclaims -n default
allowed pillar-controller patch volumeattachments.storage.k8s.io --subresource=status
allowed pillar-controller patch persistentvolumeclaims -n default --subresource=status
allowed pillar-controller list csinodes.storage.k8s.io
denied pillar-controller get secrets -n "$NS"
denied pillar-controller list pods -n "$NS"
# controller.installCrds is off by default: no CRD of anyone's may be created.
denied pillar-controller create customresourcedefinitions.apiextensions.k8s.io
denied pillar-controller get customresourcedefinitions.apiextensions.k8s.io
denied pillar-controller update customresourcedefinitions.apiextensions.k8s.io
denied pillar-controller delete customresourcedefinitions.apiextensions.k8s.io
denied pillar-controller update leases.coordination.k8s.io -n default
denied pillar-controller create pods -n "$NS"
for sa in pillar-node pillar-agent; do
  denied $sa list pillarvolumestates.$DRIVER
  denied $sa get pillarnodes.$DRIVER
  denied $sa list secrets -n "$NS"
  denied $sa get secrets -n "$NS"
  denied $sa create tokenreviews.authentication.k8s.io
  denied $sa get leases.coordination.k8s.io -n "$NS"
  denied $sa list nodes
  denied $sa list pods -n "$NS"
done
for what in "create tokenreviews.authentication.k8s.io" "patch pillarvolumestates.$DRIVER" \
  "update leases.coordination.k8s.io -n $NS" "create events -n $NS" "create persistentvolumes" \
  "list storageclasses.storage.k8s.io" "list csinodes.storage.k8s.io"; do
  # shellcheck disable=SC2086
  denied pillar-agent $what
done

# The auth render's Secret Roles on the server: the controller may get the
# named CHAP Secrets and nothing else of the kind.
kubectl create namespace keys >/dev/null 2>&1 || fail "namespace keys created"
if jq '[.[] | select(.metadata.name | endswith("-auth-secrets"))] | {apiVersion: "v1", kind: "List", items: .}' "$W/auth.json" \
  >"$W/auth-rbac.json" && kubectl apply --server-side --field-manager=pillar-chart-test -f "$W/auth-rbac.json" >"$W/err" 2>&1; then
  ok "the auth render's Roles and RoleBindings accepted ($(jq '.items | length' "$W/auth-rbac.json") objects)"
else
  fail "the auth render's Roles and RoleBindings accepted" "$(cat "$W/err")"
fi
allowed pillar-controller get secrets/pillar-chap -n "$NS"
allowed pillar-controller get secrets/nvme-keys -n keys
denied pillar-controller get secrets/nvme-keys -n "$NS"
denied pillar-controller get secrets/other -n "$NS"
denied pillar-controller list secrets -n "$NS"
denied pillar-controller watch secrets -n keys
denied pillar-controller update secrets/pillar-chap -n "$NS"
denied pillar-node get secrets/pillar-chap -n "$NS"
denied pillar-agent get secrets/nvme-keys -n keys

# The controller's ServiceAccount reviews a node plugin token (audience
# pillar's), as pillar-controller does for every node report.
if tok=$(kubectl -n "$NS" create token pillar-node --audience "$DRIVER" --duration 10m 2>"$W/err"); then
  review=$(kubectl create --raw /apis/authentication.k8s.io/v1/tokenreviews \
    --as="system:serviceaccount:$NS:pillar-controller" -f - 2>&1 <<JSON
{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
 "spec": {"token": "$tok", "audiences": ["$DRIVER"]}}
JSON
  )
  check "the controller's ServiceAccount reviews a node token: system:serviceaccount:$NS:pillar-node" \
    ".status.authenticated == true and .status.user.username == \"system:serviceaccount:$NS:pillar-node\"" \
    <(jq -s '.[0]' <<<"$review" 2>/dev/null || echo '{}')
else
  fail "a token for pillar-node" "$(cat "$W/err")"
fi

# The rendered pillar-controller, run for real: the Deployment's arguments
# (paths moved into W, --store=kube given the ServiceAccount's kubeconfig
# instead of the pod's, $(POD_NAME) expanded as kubelet would), as the
# chart's controller ServiceAccount, two replicas; and the rendered liveness
# probe run against each.
ctl_args() { jq -r "$(obj Deployment pillar-controller) | $ctl | .args[]" "$W/default.json"; }
pillar_certs "$W" >/dev/null 2>&1 || fail "certificates (tests/tools/make-certs.sh)"
mkdir -p "$W/tls/agent-tls" "$W/tls/registry-tls"
for d in agent-tls:controller registry-tls:agent; do
  cp "$W/certs/${d#*:}.crt" "$W/tls/${d%%:*}/tls.crt"
  cp "$W/certs/${d#*:}.key" "$W/tls/${d%%:*}/tls.key"
  cp "$W/certs/ca.crt" "$W/tls/${d%%:*}/ca.crt"
done
ctl_token=$(kubectl -n "$NS" create token pillar-controller --duration 1h 2>"$W/err") ||
  fail "a token for pillar-controller" "$(cat "$W/err")"
cat >"$W/controller.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$K8S_SERVER", certificate-authority: "$K8S_CA"}}]
users: [{name: u, user: {token: "$ctl_token"}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: $NS}}]
current-context: x
YAML
read -r port_a port_b mport_a mport_b <<<"$(_k8s_free_ports 4)"
# Two replicas on one host: the rendered 0.0.0.0:9650 moves to a port each.
run_replica() { # run_replica NAME PORT METRICS-PORT
  local a args=()
  mkdir -p "$W/$1"
  while IFS= read -r a; do
    case $a in
      --store=kube) a=--store=kube:$W/controller.kubeconfig ;;
      --csi-endpoint=*) a=--csi-endpoint=unix://$W/$1/csi.sock ;;
      --registry-listen=*) a=--registry-listen=127.0.0.1:$2 ;;
      --ready-file=*) a=--ready-file=$W/$1/ready ;;
      --metrics-address=*) a=--metrics-address=127.0.0.1:$3 ;;
    esac
    a=${a//\/etc\/pillar-csi\//$W/tls/}
    args+=("${a//\$(POD_NAME)/$1}")
  done < <(ctl_args)
  _k8s_start "$W" "$1" "$PILLAR_CONTROLLER_BIN" "${args[@]}"
}
probe() { # probe NAME PORT: the rendered liveness probe with W/NAME's paths; its exit status
  local -a cmd
  mapfile -t cmd < <(jq -r "$(obj Deployment pillar-controller) | $ctl | .livenessProbe.exec.command[]" "$W/default.json")
  local script=${cmd[2]//\/tmp\/pillar-controller.ready/$W/$1/ready}
  script=${script//\/csi\/csi.sock/$W/$1/csi.sock}
  script=${script//\/dev\/tcp\/127.0.0.1\/9600//dev/tcp/127.0.0.1/$2}
  "${cmd[0]}" "${cmd[1]}" "$script" >/dev/null 2>&1
}
leader_metric() { # leader_metric PORT: pillar_controller_leader as that replica serves it
  local out
  out=$(curl --noproxy '*' -sS --max-time 5 "http://127.0.0.1:$1/metrics" 2>&1) || { echo "curl: ${out:0:200}"; return; }
  awk '$1 == "pillar_controller_leader" { v = $2 + 0 } END { print (v == "" ? "absent" : v) }' <<<"$out"
}
holder() { kubectl -n "$NS" get lease pillar-csi-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
run_replica controller-a "$port_a" "$mport_a"
if took=$(wait_for 60 test -s "$W/controller-a/ready"); then
  ok "the rendered arguments run pillar-controller as the chart's ServiceAccount: it leads ($took s)"
else
  fail "the rendered arguments run pillar-controller as the chart's ServiceAccount" "$(tail -3 "$W/logs/controller-a.log")"
fi
expect_eq "Lease $NS/pillar-csi-controller held by controller-a" controller-a "$(holder)"
expect_eq "the rendered --metrics-address serves pillar_controller_leader 1 on the leader" 1 "$(leader_metric "$mport_a")"
run_replica controller-b "$port_b" "$mport_b"
# A standby serves its CSI socket (Probe ready=false, so the sidecars beside it
# wait), but no registry and no ready file.
if wait_for 30 grep -q 'waiting for leadership' "$W/logs/controller-b.log" >/dev/null &&
  sleep 1 && [[ ! -e $W/controller-b/ready && -S $W/controller-b/csi.sock ]] &&
  [[ $("$PILLAR_CALL_BIN" --endpoint "unix://$W/controller-b/csi.sock" Probe '{}' 2>&1 | tr -d ' \n') == *'"ready":false'* ]]; then
  ok "a second replica waits as a standby: CSI socket answers Probe ready=false, no ready file"
else
  fail "a second replica waits as a standby" "$(tail -3 "$W/logs/controller-b.log")"
fi
expect_eq "pillar_controller_leader 0 on the standby" 0 "$(leader_metric "$mport_b")"
if probe controller-a "$port_a"; then ok "liveness probe passes on the leader"; else fail "liveness probe passes on the leader"; fi
if probe controller-b "$port_b"; then ok "liveness probe passes on the standby"; else fail "liveness probe passes on the standby"; fi
pillar_kill "$W" controller-a KILL 2>/dev/null  # (no "Killed" notice from bash)
if probe controller-a "$port_a"; then
  fail "liveness probe fails on a leader that stopped serving"
else
  ok "liveness probe fails on a leader that stopped serving (ready file and socket left behind)"
fi
if took=$(wait_for 90 test -s "$W/controller-b/ready"); then
  ok "the standby takes over when the leader dies ($took s)"
else
  fail "the standby takes over when the leader dies" "$(tail -3 "$W/logs/controller-b.log")"
fi
if probe controller-b "$port_b"; then ok "liveness probe passes on the new leader"; else fail "liveness probe passes on the new leader"; fi
expect_eq "Lease held by controller-b" controller-b "$(holder)"
expect_eq "pillar_controller_leader 1 on the new leader" 1 "$(leader_metric "$mport_b")"

# The real CSI sidecars with the Deployment's arguments beside the leader, as
# the same ServiceAccount: each takes its own Lease and lists and watches what
# it serves, which the chart's roles must allow.
sidecar_args() {
  jq -r "$(obj Deployment pillar-controller) | .spec.template.spec.containers[] | select(.name == \"$1\") | .args[]" "$W/default.json"
}
for s in csi-provisioner csi-attacher csi-resizer; do
  args=(--kubeconfig="$W/controller.kubeconfig")
  while IFS= read -r a; do
    a=${a//\/csi\/csi.sock/$W/controller-b/csi.sock}
    args+=("${a//\$(POD_NAMESPACE)/$NS}")
  done < <(sidecar_args "$s")
  _k8s_start "$W" "$s" "$CSI_BIN/$s" "${args[@]}"
done
sidecar_leases() {
  [[ $(kubectl -n "$NS" get leases -o json 2>/dev/null | jq '[.items[] | select(.metadata.name != "pillar-csi-controller"
    and (.spec.holderIdentity // "") != "")] | length') == 3 ]]
}
if took=$(wait_for 60 sidecar_leases); then
  ok "csi-provisioner, csi-attacher and csi-resizer run with the rendered arguments and lead ($took s)"
else
  fail "the sidecars run with the rendered arguments and lead" "$(tail -n 3 "$W"/logs/csi-*.log)"
fi
sleep 2   # their informers list and watch right after leading
forbidden=$(cat "$W"/logs/controller-*.log "$W"/logs/csi-*.log | grep -ci 'forbidden')
expect_eq "no request of pillar-controller or the sidecars was forbidden (the chart's RBAC suffices)" 0 "$forbidden"

# A claim on a chap class: csi-provisioner, as the chart's ServiceAccount, reads
# the class's Secret and calls CreateVolume (which fails here: no agent runs in
# this suite, so the claim stays Pending with pillar's answer in its events). A
# class made by hand that names a Secret the chart did not grant is refused by
# the API server before any CreateVolume.
jq '[.[] | select(.kind == "StorageClass" and .metadata.name == "chap-iscsi")] | {apiVersion: "v1", kind: "List", items: .}' \
  "$W/auth.json" >"$W/auth-sc.json"
kubectl apply -f "$W/auth-sc.json" >/dev/null 2>"$W/err" || fail "StorageClass chap-iscsi applied" "$(cat "$W/err")"
kubectl apply -f - >/dev/null 2>"$W/err" <<YAML || fail "Secrets and a hand-made class applied" "$(cat "$W/err")"
apiVersion: v1
kind: Secret
metadata: {name: pillar-chap, namespace: $NS}
stringData: {chapUsername: pillar-initiator, chapPassword: correct-horse-battery}
---
apiVersion: v1
kind: Secret
metadata: {name: other, namespace: $NS}
stringData: {chapUsername: pillar-initiator, chapPassword: correct-horse-battery}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: chap-ungranted}
provisioner: $DRIVER
parameters:
  {agent: storage-1, pool: local, protocol: iscsi, acl: "true", auth: chap,
   csi.storage.k8s.io/provisioner-secret-name: other, csi.storage.k8s.io/provisioner-secret-namespace: $NS}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: chap-claim, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: chap-iscsi, resources: {requests: {storage: 16Mi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ungranted-claim, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: chap-ungranted, resources: {requests: {storage: 16Mi}}}
YAML
claim_events() { kubectl -n default get events --field-selector "involvedObject.name=$1,reason=ProvisioningFailed" \
  -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' 2>/dev/null; }
has_event() { [[ -n $(claim_events "$1") ]]; }
if took=$(wait_for 60 has_event chap-claim); then
  msg=$(claim_events chap-claim | head -1)
  if [[ $msg == *"rpc error"* && $msg != *ecret* && $msg != *orbidden* ]]; then
    ok "a claim on the chap class reached CreateVolume with the class's Secret ($took s): ${msg:0:120}"
  else
    fail "a claim on the chap class reached CreateVolume with the class's Secret" "$msg"
  fi
else
  fail "a claim on the chap class: a ProvisioningFailed event" "$(kubectl -n default describe pvc chap-claim 2>&1 | tail -5)"
fi
if took=$(wait_for 60 has_event ungranted-claim); then
  msg=$(claim_events ungranted-claim | head -1)
  if [[ $msg == *orbidden* && $msg != *"rpc error"* ]]; then
    ok "a claim naming a Secret the chart did not grant is refused before CreateVolume ($took s)"
  else
    fail "a claim naming a Secret the chart did not grant is refused before CreateVolume" "$msg"
  fi
else
  fail "the ungranted claim: a ProvisioningFailed event" "$(kubectl -n default describe pvc ungranted-claim 2>&1 | tail -5)"
fi
kubectl -n default delete pvc chap-claim ungranted-claim --wait=false >/dev/null 2>&1
suite_cleanup
pillar_kill "$W" controller-b TERM

# certManager render: the kinds the harness has, as a server-side dry run (no
# cert-manager CRDs here); its cert-manager objects were checked as rendered.
# It enables the snapshotter, so it has a VolumeSnapshotClass: the cluster's
# VolumeSnapshot CRDs first, as tests/k8s/cluster installs them (the files of
# the csi-snapshotter release, tests/k8s/snapshot-crds.sh).
kubectl create namespace "$NS2" >/dev/null 2>&1 || fail "namespace $NS2 created"
mapfile -t snapshot_crds < <("$here/snapshot-crds.sh")
if k8s_snapshot_crds "$W" "${snapshot_crds[@]}"; then
  ok "the VolumeSnapshot CRDs of the csi-snapshotter release Established"
else
  fail "the VolumeSnapshot CRDs (tests/k8s/snapshot-crds.sh)" "$(tail -3 "$W/logs/snapshot-crds.log" 2>&1)"
fi
# dry_run_known NAME RENDER-JSON KEEP-FILTER LEFT-OUT: the render's objects
# KEEP-FILTER keeps, accepted by a server-side dry run.
dry_run_known() {
  jq "[.[] | select($3)] | {apiVersion: \"v1\", kind: \"List\", items: .}" "$2" >"$W/known.json"
  if kubectl apply --server-side --dry-run=server --field-manager=pillar-chart-test --force-conflicts \
    -f "$W/known.json" >"$W/dry.out" 2>&1; then
    ok "$1 accepted by a server-side dry run ($(jq '.items | length' "$W/known.json") objects without $4)"
  else
    fail "$1 accepted by a server-side dry run" "$(grep -v 'serverside-applied' "$W/dry.out" | head -10)"
  fi
}
dry_run_known "the non-default render" "$W/custom.json" '.apiVersion | startswith("cert-manager.io") | not' "the cert-manager ones"
# The metrics render's Services and dashboard ConfigMap; its ServiceMonitors
# are left out: this API server has no Prometheus Operator CRDs (their fields
# were checked as rendered).
dry_run_known "the metrics render" "$W/monitoring.json" '.kind != "ServiceMonitor"' "the ServiceMonitors"

# Finally the user's path: helm install itself (CRDs from crds/, which exist
# now, then the templates), into a fresh cluster state for the chart's
# cluster-scoped objects.
kubectl delete --wait=true -f "$W/default.yaml" -f "$W/agent-ds.json" >/dev/null 2>"$W/err" || fail "the applied render deleted" "$(cat "$W/err")"
if helm install pillar "$chart" --namespace "$NS" --kubeconfig "$K8S_KUBECONFIG" >"$W/install.out" 2>&1; then
  ok "helm install on the real API server"
else
  fail "helm install on the real API server" "$(tail -10 "$W/install.out")"
fi
for want in "kubectl get pvst" "kubectl -n $NS get lease pillar-csi-controller" "pillar-nvmeof-tcp"; do
  if grep -qF -- "$want" "$W/install.out"; then ok "NOTES name: $want"; else fail "NOTES name: $want"; fi
done
st=$(helm status pillar --namespace "$NS" --kubeconfig "$K8S_KUBECONFIG" -o json 2>&1 | jq -r '.info.status' 2>/dev/null)
expect_eq "helm status: deployed" deployed "$st"
if helm uninstall pillar --namespace "$NS" --kubeconfig "$K8S_KUBECONFIG" >"$W/uninstall.out" 2>&1 &&
  ! kubectl get csidriver $DRIVER >/dev/null 2>&1; then
  ok "helm uninstall removes the chart's objects"
else
  fail "helm uninstall removes the chart's objects" "$(tail -3 "$W/uninstall.out")"
fi

finish
