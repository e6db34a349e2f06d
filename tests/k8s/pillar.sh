# shellcheck shell=bash
# pillar's own daemons beside the loopback control plane of lib.sh, for the
# Kubernetes suites. Source lib.sh first, call k8s_up WORKDIR, then:
#
#   pillar_certs W                     a CA and agent/controller certificates (W/certs)
#   pillar_start_agent W               pillar-agent-sim: file pool W/pool, simulated
#                                      configfs W/configfs; sets PILLAR_AGENT_PORT
#   pillar_stop_agent W                kills it (as a crash would)
#   pillar_start_controller W NAME ARGS...
#                                      pillar-controller NAME with the agent, CSI on
#                                      W/NAME.sock, registry on a free port
#                                      (W/NAME.port), then ARGS; waits until ready
#   pillar_launch_controller W NAME ARGS...
#                                      the same without waiting (a replica that
#                                      does not lead is never ready)
#   pillar_kill W NAME [SIGNAL]        signals a daemon (default KILL), waits for its end
#   pillar_csi W NAME METHOD JSON      csi-call against controller NAME
#   pillar_reg W NAME METHOD JSON      csi-call against its registry
#   pillar_ctl ARGS...                 pillarctl
#   pillar_down W                      stops every pillar daemon of W, detaches its pool's loop devices
#   pillar_node_a DURATION             a cluster's objects for pillar on node-a without a kubelet
#                                      (see below); prints a token of node-a's pillar-node pod
#
# Daemons are started like lib.sh's (parent-death signal, pid files in
# W/run, logs in W/logs), so a killed test leaves nothing behind.

_PILLAR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PILLAR_BUILD=${PILLAR_BUILD_DIR:-$_PILLAR_ROOT/build}
[[ $PILLAR_BUILD == /* ]] || PILLAR_BUILD=$_PILLAR_ROOT/$PILLAR_BUILD
PILLAR_AGENT_BIN=$PILLAR_BUILD/src/testing/pillar-agent-sim
PILLAR_CONTROLLER_BIN=$PILLAR_BUILD/src/controller/pillar-controller
PILLAR_CTL_BIN=$PILLAR_BUILD/src/ctl/pillarctl
PILLAR_CALL_BIN=$PILLAR_BUILD/tests/csi-call

# _pillar_wait_file FILE SECONDS: until FILE is non-empty.
_pillar_wait_file() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [[ -s $1 ]] && return 0
    sleep 0.1
  done
  return 1
}

pillar_certs() {
  [[ -s $1/certs/ca.crt ]] || "$_PILLAR_ROOT/tests/tools/make-certs.sh" "$1/certs"
}

pillar_start_agent() {
  local w=$1
  pillar_certs "$w" || return 1
  mkdir -p "$w/run" "$w/logs" "$w/pool"
  rm -f "$w/agent.ready"
  _k8s_start "$w" pillar-agent "$PILLAR_AGENT_BIN" --listen "127.0.0.1:${PILLAR_AGENT_PORT:-0}" \
    --ready-file "$w/agent.ready" --tls-cert "$w/certs/agent.crt" --tls-key "$w/certs/agent.key" \
    --tls-ca "$w/certs/ca.crt" --node-name storage-1 --pool "demo=file:$w/pool" \
    --configfs-root "$w/configfs" --state-dir "$w/agent-state" --exports-dir "$w/exports.d" \
    --protocols nvmeof-tcp,iscsi --epoch-check-interval 1 --log-level info
  if ! _pillar_wait_file "$w/agent.ready" 60; then
    echo "pillar: the agent did not get ready" >&2
    tail -20 "$w/logs/pillar-agent.log" >&2
    return 1
  fi
  PILLAR_AGENT_PORT=$(cat "$w/agent.ready")
  export PILLAR_AGENT_PORT
}

pillar_stop_agent() {
  local pid
  pid=$(cat "$1/run/pillar-agent.pid" 2>/dev/null) || return 0
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

pillar_launch_controller() {
  local w=$1 name=$2
  shift 2
  rm -f "$w/$name.port"
  _k8s_start "$w" "$name" "$PILLAR_CONTROLLER_BIN" --csi-endpoint "unix://$w/$name.sock" \
    --registry-listen 127.0.0.1:0 --registry-insecure \
    --agent "storage-1=127.0.0.1:$PILLAR_AGENT_PORT" \
    --agent-tls-cert "$w/certs/controller.crt" --agent-tls-key "$w/certs/controller.key" \
    --agent-tls-ca "$w/certs/ca.crt" --resync-interval 3 --epoch-poll-interval 1 \
    --ready-file "$w/$name.port" --log-level info "$@"
}

pillar_start_controller() {
  local w=$1 name=$2
  pillar_launch_controller "$@"
  if ! _pillar_wait_file "$w/$name.port" 120; then
    echo "pillar: controller $name did not get ready" >&2
    tail -20 "$w/logs/$name.log" >&2
    return 1
  fi
}

# pillar_kill W NAME [SIGNAL]: signals daemon NAME (default KILL) and waits until it is gone.
pillar_kill() {
  local pid
  pid=$(cat "$1/run/$2.pid" 2>/dev/null) || return 0
  kill "-${3:-KILL}" "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

# pillar_node_a DURATION: what a cluster holds for pillar on node-a, made
# without a kubelet: the CSIDriver, the StorageClass pillar-nvmeof (storage-1's
# pool demo, served on 127.0.0.1), the Node node-a (attach/detach by the
# controller) and its CSINode, and a pod of ServiceAccount pillar:pillar-node
# on node-a, whose bound token (audience pillar-csi.bhyoo.com, valid
# DURATION) it prints, as pillar-node presents it to the registry. Needs a
# kubectl function (the caller's) and the namespace and ServiceAccount.
pillar_node_a() {
  kubectl apply -f - >/dev/null <<'YAML' || return 1
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: pillar-csi.bhyoo.com}
spec: {attachRequired: true, podInfoOnMount: false, fsGroupPolicy: File, volumeLifecycleModes: [Persistent]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: pillar-nvmeof}
provisioner: pillar-csi.bhyoo.com
allowVolumeExpansion: true
volumeBindingMode: Immediate
reclaimPolicy: Delete
parameters: {agent: storage-1, pool: demo, protocol: nvmeof-tcp, acl: "true", bindAddress: 127.0.0.1, fsType: ext4}
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  annotations: {volumes.kubernetes.io/controller-managed-attach-detach: "true"}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: node-a}
spec:
  drivers: [{name: pillar-csi.bhyoo.com, nodeID: node-a}]
YAML
  # The Node needs an owner reference for its CSINode in a real cluster; here it is enough that both exist.
  kubectl -n pillar apply -f - >/dev/null <<'YAML' || return 1
apiVersion: v1
kind: Pod
metadata: {name: pillar-node-a}
spec:
  nodeName: node-a
  serviceAccountName: pillar-node
  containers: [{name: c, image: registry.invalid/pillar/none:0}]
YAML
  kubectl -n pillar create token pillar-node --bound-object-kind Pod --bound-object-name pillar-node-a \
    --audience pillar-csi.bhyoo.com --duration "${1:?usage: pillar_node_a DURATION}"
}

pillar_csi() { "$PILLAR_CALL_BIN" --endpoint "unix://$1/$2.sock" "${@:3}"; }
pillar_reg() { "$PILLAR_CALL_BIN" --endpoint "127.0.0.1:$(cat "$1/$2.port")" "${@:3}"; }
pillar_ctl() { "$PILLAR_CTL_BIN" "$@"; }

pillar_down() {
  local f
  for f in "$1"/run/pillar-*.pid "$1"/run/controller-*.pid; do
    [[ -e $f ]] && _k8s_stop_one "$f"
  done
  pillar_detach_loops "$1"
  return 0
}

# pillar_detach_loops W: detaches the loop devices the agent attached for W's
# file pool. A storage node keeps them across agent restarts by design; a
# test run leaves none behind (they outlive the deleted images otherwise).
pillar_detach_loops() {
  local dev back
  for dev in /sys/block/loop*; do
    [[ -r $dev/loop/backing_file ]] || continue
    back=$(cat "$dev/loop/backing_file" 2>/dev/null) || continue
    [[ $back == "$1/pool/"* ]] || continue
    losetup -d "/dev/${dev##*/}" 2>/dev/null || true
  done
}
