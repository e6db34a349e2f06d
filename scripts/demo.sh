#!/usr/bin/env bash
# Installs what is missing, builds, and runs the local demonstration: the
# real agent (file pool, configfs SIMULATED in a directory since this host has
# no nvmet) and the real controller on the embedded SQLite store, then breaks
# the exports the ways the seed incidents did and shows each one repaired.
# Every PASS is a checked outcome; every failed step is a FAIL, and the run
# goes on where it can. Ends with "demo: N passed, M failed" (an abort counts
# as one failure); exit != 0 on any failure. Waits are for conditions, with
# a ceiling (CEILING, 60 s) far above the time they take.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
trap 'echo "demo: setup (install-deps, build) failed"; echo "demo: 0 passed, 1 failed"' EXIT
./scripts/install-deps.sh
./scripts/build.sh >/dev/null
bin=${PILLAR_BUILD_DIR:-build}
agent_bin=$root/$bin/src/testing/pillar-agent-sim
controller_bin=$root/$bin/src/controller/pillar-controller
ctl_bin=$root/$bin/src/ctl/pillarctl
call_bin=$root/$bin/tests/csi-call

demo=$(mktemp -d /tmp/pillar-demo-XXXXXX)
pids=()
CEILING=60
passed=0 failed=0 finished=0
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  losetup --list --noheadings --output NAME,BACK-FILE 2>/dev/null | awk -v d="$demo" 'index($2, d) == 1 {print $1}' |
    while read -r dev; do losetup -d "$dev" || true; done
  if [[ "${PILLAR_DEMO_KEEP:-0}" != 1 ]]; then rm -rf "$demo"; else echo "demo: kept $demo"; fi
}
# The closing line comes last, after the cleanup, however the script ends.
summary() {
  local rc=$?
  set +e
  if ((!finished)); then
    printf 'FAIL the demo stopped early (exit %d)\n' "$rc"
    failed=$((failed + 1))
  fi
  if ((failed)); then
    for f in "$demo/agent.log" "$demo/controller.log"; do
      [[ -s "$f" ]] && { echo "---- $(basename "$f") (last 10 lines)"; tail -n 10 "$f"; }
    done
  fi
  cleanup
  printf '\ndemo: %d passed, %d failed\n' "$passed" "$failed"
  ((failed == 0)) || exit 1
}
trap summary EXIT

step() { printf '\n== %s\n' "$*"; }
ok() { printf 'PASS %s\n' "$*"; passed=$((passed + 1)); }
bad() { printf 'FAIL %s\n' "$*"; failed=$((failed + 1)); }
# fatal MESSAGE: a FAIL after which nothing else can be shown.
fatal() { bad "$*"; exit 1; }
# wait_for SECONDS CMD...: polls CMD every 0.1 s; prints the elapsed ms
# (-1 and status 1 when SECONDS passed first).
wait_for() {
  local limit=$1; shift
  local start end
  start=$(date +%s%N)
  while ! "$@" >/dev/null 2>&1; do
    end=$(date +%s%N)
    if (( (end - start) / 1000000 > limit * 1000 )); then echo -1; return 1; fi
    sleep 0.1
  done
  end=$(date +%s%N)
  echo $(( (end - start) / 1000000 ))
}
csi() { "$call_bin" --endpoint "unix://$demo/csi.sock" "$@"; }
reg() { "$call_bin" --endpoint "127.0.0.1:$reg_port" "$@"; }
ctl() { "$ctl_bin" --store "$demo/store.db" "$@"; }
condition() { ctl describe volume "$1" | sed -n 's/^  ExportReconciled=\([A-Za-z]*\) reason=\([A-Za-z]*\).*/\1\/\2/p'; }
is_reconciled() { [[ "$(condition "$1")" == "True/Reconciled" ]]; }
is_unavailable() { [[ "$(condition "$1")" == "False/AgentUnavailable" ]]; }

nqn_a=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555
nqn_a2=nqn.2014-08.org.nvmexpress:uuid:99999999-2222-4333-8444-555555555555
subsys=$demo/configfs/nvmet/subsystems/nqn.2026-12.com.bhyoo.pillar-csi:demo:2fdemo-1

step "start the agent (mutual TLS; file pool; configfs simulated) and the controller"
tests/tools/make-certs.sh "$demo/certs"
start_agent() {
  rm -f "$demo/agent.ready"
  "$agent_bin" --listen "127.0.0.1:${agent_port:-0}" --ready-file "$demo/agent.ready" \
    --tls-cert "$demo/certs/agent.crt" --tls-key "$demo/certs/agent.key" --tls-ca "$demo/certs/ca.crt" \
    --node-name storage-1 --pool "demo=file:$demo/pool" --configfs-root "$demo/configfs" \
    --state-dir "$demo/agent-state" --exports-dir "$demo/exports.d" \
    --protocols nvmeof-tcp,iscsi --epoch-check-interval 1 --log-level warn 2>>"$demo/agent.log" &
  agent_pid=$!
  pids+=("$agent_pid")
  wait_for "$CEILING" test -s "$demo/agent.ready" >/dev/null || fatal "the agent did not get ready (see agent.log)"
  agent_port=$(cat "$demo/agent.ready")
}
start_agent
"$controller_bin" --csi-endpoint "unix://$demo/csi.sock" --registry-listen 127.0.0.1:0 \
  --registry-insecure --store "$demo/store.db" --agent "storage-1=127.0.0.1:$agent_port" \
  --agent-tls-cert "$demo/certs/controller.crt" --agent-tls-key "$demo/certs/controller.key" \
  --agent-tls-ca "$demo/certs/ca.crt" --resync-interval 3 --epoch-poll-interval 1 \
  --ready-file "$demo/controller.ready" 2>>"$demo/controller.log" &
pids+=("$!")
wait_for "$CEILING" test -s "$demo/controller.ready" >/dev/null || fatal "the controller did not get ready (see controller.log)"
reg_port=$(cat "$demo/controller.ready")
echo "agent on 127.0.0.1:$agent_port, controller CSI at $demo/csi.sock, registry on :$reg_port"
ok "agent and controller ready"

step "node-a reports its identity to the registry"
if reg RegisterNode "{\"identity\":{\"nodeId\":\"node-a\",\"hostNqn\":\"$nqn_a\",\"ipAddresses\":[\"10.99.0.11\"]}}" >/dev/null &&
  reg GetNode '{"nodeId":"node-a"}' | grep -qF "$nqn_a"; then
  ok "node-a registered"
else
  fatal "node-a could not be registered"
fi

step "CreateVolume demo-1 (NVMe-oF/TCP, ACL on): exportSpec recorded, export created, nobody admitted"
out=$(csi CreateVolume '{"name":"demo-1","capacityRange":{"requiredBytes":"67108864"},
  "volumeCapabilities":[{"block":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}],
  "parameters":{"agent":"storage-1","pool":"demo","protocol":"nvmeof-tcp","bindAddress":"127.0.0.1"}}') ||
  fatal "CreateVolume demo-1 failed: $out"
tr -d '\n' <<<"$out" | sed 's/  */ /g'; echo
if is_reconciled demo-1 && [[ -d "$subsys" ]]; then ok "demo-1 exported, ExportReconciled=True"; else bad "demo-1 not exported"; fi
if [[ -d "$subsys/allowed_hosts" && -z "$(ls -A "$subsys/allowed_hosts")" && "$(cat "$subsys/attr_allow_any_host" 2>/dev/null)" == 0 ]]; then
  ok "nobody admitted before a publish (allowed_hosts empty, attr_allow_any_host=0)"
else
  bad "the new export admits someone before any publish"
fi

step "ControllerPublishVolume demo-1 -> node-a: its host NQN is admitted"
out=$(csi ControllerPublishVolume '{"volumeId":"demo-1","nodeId":"node-a",
  "volumeCapability":{"block":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}}') ||
  fatal "ControllerPublishVolume demo-1 -> node-a failed: $out"
tr -d '\n' <<<"$out" | sed 's/  */ /g'; echo
if [[ -L "$subsys/allowed_hosts/$nqn_a" ]]; then ok "allowed_hosts has node-a"; else bad "node-a not admitted"; fi

step "fault 1: node-a's ACL entry deleted out of band (seed 000, variant 2)"
rm "$subsys/allowed_hosts/$nqn_a"
if ms=$(wait_for "$CEILING" test -L "$subsys/allowed_hosts/$nqn_a"); then
  ok "restored by the periodic resync in ${ms} ms"
else
  bad "not restored within ${CEILING} s"
fi

step "fault 2: the storage node reboots and loses its whole target state"
kill "$agent_pid"
wait "$agent_pid" 2>/dev/null || true # it was killed on purpose: its exit status says nothing
rm -rf "$demo/configfs"
if ms=$(wait_for "$CEILING" is_unavailable demo-1); then
  ok "while the agent is down: ExportReconciled=False/AgentUnavailable (after ${ms} ms)"
else
  bad "while the agent is down the condition says $(condition demo-1), not False/AgentUnavailable"
fi
start_agent
if ms=$(wait_for "$CEILING" test -L "$subsys/allowed_hosts/$nqn_a"); then
  ok "rebuilt from the record after the agent came back, in ${ms} ms (no controller restart)"
else
  bad "not rebuilt within ${CEILING} s"
fi
if ms=$(wait_for "$CEILING" is_reconciled demo-1); then
  ok "ExportReconciled=True again (${ms} ms)"
else
  bad "not Reconciled after the agent came back: $(condition demo-1)"
fi

step "fault 3: node-a is re-imaged (new host NQN) while the volume stays published"
if ! reg RegisterNode "{\"identity\":{\"nodeId\":\"node-a\",\"hostNqn\":\"$nqn_a2\",\"ipAddresses\":[\"10.99.0.21\"]}}" >/dev/null; then
  bad "node-a's new identity could not be registered"
elif ms=$(wait_for "$CEILING" test -L "$subsys/allowed_hosts/$nqn_a2"); then
  ok "the rule followed the node in ${ms} ms"
else
  bad "rule did not follow within ${CEILING} s"
fi
if [[ ! -e "$subsys/allowed_hosts/$nqn_a" ]]; then ok "the old identity was removed with it"; else bad "old identity left behind"; fi

step "pillarctl: recorded intent and drift"
if ctl get volumes; then ok "pillarctl get volumes"; else bad "pillarctl get volumes failed"; fi
if ctl --agent-tls-cert "$demo/certs/controller.crt" --agent-tls-key "$demo/certs/controller.key" \
  --agent-tls-ca "$demo/certs/ca.crt" drift; then
  ok "no drift"
else
  bad "drift reported (or pillarctl drift failed)"
fi

step "ControllerUnpublishVolume (revoking phase, confirmed) and DeleteVolume"
if ! out=$(csi ControllerUnpublishVolume '{"volumeId":"demo-1","nodeId":"node-a"}'); then
  bad "ControllerUnpublishVolume failed: $out"
elif [[ ! -e "$subsys/allowed_hosts/$nqn_a2" ]]; then
  ok "node-a's entry removed"
else
  bad "entry still there"
fi
if ! out=$(csi DeleteVolume '{"volumeId":"demo-1"}'); then
  bad "DeleteVolume failed: $out"
elif [[ ! -e "$subsys" && ! -e "$demo/pool/demo-1.img" ]]; then
  ok "export and backend volume deleted"
else
  bad "leftovers"
fi
finished=1
