#!/usr/bin/env bash
# Issue 5's scenarios against real kernels: pillar-agent + pillar-controller
# in a "storage" guest (real nvmet / LIO configfs, knfsd, a file pool and an
# LVM pool), pillar-node in "consumer-a" and "consumer-b", CSI calls through
# build/tests/csi-call. One boot of three guests; faults are injected on the
# running guests (module reload, agent restart, configfs/exportfs edits, an
# IP change); only processes are restarted, never a guest, except in s14,
# which reboots the storage guest (vm_restart) under consumer I/O.
#
#   tests/e2e/scenarios.sh                 # all; exit != 0 on any FAIL
#   E2E_ONLY="s1 s3" tests/e2e/scenarios.sh     # a subset (s1 .. s14; an unknown id is an error)
#   PILLAR_E2E_SKIP_BUILD=1 ...                 # use the binaries as built
#
# Each scenario prints PASS/FAIL, then a timing table and the closing line
# "e2e: N passed, M failed". Logs: the run dir printed at start
# (vm/<guest>/share/out/*.log: agent, controller, node plugins).
#
# Timing: no check has a wall-clock limit that a slow machine could miss.
# Every wait is for a condition, with a ceiling (CEILING, 120 s) far above
# the time it takes; the measured times are printed as "figure: ..." lines.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STORAGE_IP=10.99.0.1
A_IP=10.99.0.11
B_IP=10.99.0.12
A_IP2=10.99.0.21
REGISTRY="$STORAGE_IP:9600"
RESYNC=5                       # controller --resync-interval (jittered up to +20 %)
CEILING=120                    # s: how long any wait for a repair may take before it fails
BUILD="${PILLAR_E2E_BUILD:-$E2E_SRC/build}"
GH="$E2E_DIR/pillar-guest.sh"
AGENT_BIN="$BUILD/src/agent/pillar-agent"
CONTROLLER_BIN="$BUILD/src/controller/pillar-controller"
PILLARCTL="$BUILD/src/ctl/pillarctl"
NODE_BIN="${PILLAR_E2E_NODE_BIN:-$BUILD/src/node/pillar-node}"
CSI_CALL="$BUILD/tests/csi-call"
STORE_EDIT="$BUILD/tests/store-edit"
FH_FORGE="${PILLAR_E2E_FH_FORGE:-$BUILD/tests/fh-forge}"
IO_PROBE="$BUILD/tests/io-probe"
CTRL_SOCK=unix:///run/pillar/controller.sock
NODE_SOCK=unix:///run/pillar/node.sock
STORE=/var/lib/pillar-csi/controller/store.db
POOL_DIR=/var/lib/pillar-e2e/pool
VG=pillarvg
THIN_VG=pillarthin             # lvm-thin pool: VG on the second data disk ...
THIN_POOL=thin0                # ... and its thin pool LV
ZPOOL=tank                     # ZFS pool on the third data disk ...
ZFS_DS=$ZPOOL/pillar           # ... and the agent's pool, its dataset
# Pool profiles: where a scenario puts its volumes. "sN" runs on today's
# pools (the file pool and thick LVM, as each scenario chose them);
# "sN@zfs" puts block volumes on zvols and NFS volumes on datasets of
# $ZFS_DS; "sN@lvm-thin" puts block volumes on $THIN_VG (NFS stays on the
# file pool: lvm-thin has no file systems). s8, s9 and s10 test properties of
# the file pool and of thick LVM themselves and run on today's pools only.
BASE_SCENARIOS="s1 s2 s3 s4 s5 s6 s7 s8 s9 s10 s11 s12 s13 s14 s15 s16"
POOL_PROFILES="zfs lvm-thin"
ANY_POOL="s1 s2 s3 s4 s5 s6 s7 s11 s12 s13 s14 s15 s16"
SCENARIOS="$BASE_SCENARIOS"
for _p in $POOL_PROFILES; do
  for _id in $ANY_POOL; do SCENARIOS+=" $_id@$_p"; done
done
# What CI runs (the README's test command), for its 45 minutes: today's
# pools (file and thick LVM) without s16, s12 and s13, plus s15 (sizes,
# properties, capacity) and s16 (snapshots, restore, clone) on a live ZFS
# pool. Left to `E2E_ONLY=all` (about 35 minutes): s16 on the file pool (CI
# keeps the host's ControllerIntegrationTest on a real file pool, csi-sanity's
# snapshot specs and the cluster's snapshot life), s12 and s13 (recovery
# timing after LIO and knfsd wipes; s2 and s3 keep the repairs themselves),
# every other scenario on ZFS and everything on lvm-thin.
_ci_base="${BASE_SCENARIOS/ s16/}"
_ci_base="${_ci_base/ s12 s13/}"
DEFAULT_ONLY="$_ci_base s15@zfs s16@zfs"
ONLY="${E2E_ONLY:-$DEFAULT_ONLY}"
[[ "$ONLY" == all ]] && ONLY="$SCENARIOS"
# Benchmarks in these guests (bench/*_e2e.sh, run by bench/*.sh): ids "bN",
# on every pool profile as the scenarios, run only when E2E_ONLY names them.
# shellcheck source=../../bench/snapshots_e2e.sh
source "$E2E_SRC/bench/snapshots_e2e.sh"
BENCHES="b1"
for _id in $BENCHES; do
  BENCHES+=" $_id@zfs $_id@lvm-thin"
done
# The pools a scenario uses (use_pools sets them per profile).
POOL_BLOCK=demo POOL_LV=$VG POOL_NFS=demo
PASSED=0
FAILED=0
SC_T0=0
declare -a SUMMARY=()

# ------------------------------------------------------------------ reporting

row() { SUMMARY+=("$(printf '%-58s %8s ms' "$1" "$2")"); }
phase_time() { # NAME START_US
  local ms
  ms=$(e2e__ms_since "$2")
  row "$1" "$ms"
  e2e_log "phase $1: ${ms} ms"
}
# metric NAME MS: a measured time, from inside a scenario (a subshell); also
# printed as "figure: NAME in 1.7 s".
metric() {
  printf '%s\t%s\n' "$1" "$2" >>"$E2E_RUN/metrics"
  step "metric: $1 = $2 ms"
  printf 'figure: %s in %d.%d s\n' "$1" "$(($2 / 1000))" "$((($2 % 1000) / 100))"
}
step() { echo "  [+$(e2e__ms_since "$SC_T0") ms] $*"; }
fail() { echo "  FAILED: $*" >&2; return 1; }

use_pools() { # PROFILE: "" (today's pools), zfs, lvm-thin
  case "$1" in
    "") POOL_BLOCK=demo POOL_LV=$VG POOL_NFS=demo ;;
    zfs) POOL_BLOCK=$ZFS_DS POOL_LV=$ZFS_DS POOL_NFS=$ZFS_DS ;;
    lvm-thin) POOL_BLOCK=$THIN_VG POOL_LV=$THIN_VG POOL_NFS=demo ;;
    *) fail "unknown pool profile '$1'" ;;
  esac
}

# selected PROFILE: some selected scenario runs on that pool profile.
selected() { [[ " $ONLY " == *"@$1 "* ]]; }

# run_scenarios ID TITLE FUNCTION: the scenario on today's pools and on each
# pool profile, as far as E2E_ONLY selects them.
run_scenarios() {
  local p
  run_scenario "$1" "$2" "$3"
  for p in $POOL_PROFILES; do
    run_scenario "$1@$p" "$2 [$p]" "$3" "$p"
  done
}

run_scenario() { # ID TITLE FUNCTION [POOL_PROFILE]
  local id="$1" title="$2" fn="$3" profile="${4:-}" t0 rc=0
  [[ " $ONLY " == *" $id "* ]] || return 0
  t0=$(e2e__now)
  SC_T0=$t0
  : >"$E2E_RUN/metrics"
  e2e_log "scenario $id: $title"
  (
    set -euo pipefail
    use_pools "$profile"
    "$fn"
  ) &
  wait $! || rc=$?
  phase_time "$id $title" "$t0"
  local name ms
  while IFS=$'\t' read -r name ms; do
    row "    $name" "$ms"
  done <"$E2E_RUN/metrics"
  if [[ $rc -eq 0 ]]; then
    echo "PASS: $id $title"
    PASSED=$((PASSED + 1))
  else
    echo "FAIL: $id $title (exit $rc)"
    FAILED=$((FAILED + 1))
    dump_logs
    cleanup_after_failure || e2e_log "cleanup after $id failed"
  fi
}

# Put the topology back after a failed scenario so the next one starts
# clean: consumer-a's address, every volume unpublished and deleted.
cleanup_after_failure() {
  local -
  set +e
  if [[ "$(vm_ip consumer-a)" != "$A_IP" ]]; then
    vm_set_ip consumer-a eth0 "$A_IP/24"
    e2e__sleep 3
    gh consumer-a stop pillar-node
    start_node consumer-a
  fi
  local vols v g
  vols="$(vm_exec storage "$PILLARCTL" --store="$STORE" get volumes 2>/dev/null | awk 'NR > 1 { print $1 }')"
  for v in $vols; do
    for g in consumer-a consumer-b; do
      node_unpublish "$v" "$g" 2>/dev/null
      node_unstage "$v" "$g" 2>/dev/null
      ctl_unpublish "$v" "$g" 2>/dev/null
    done
    delete "$v" 2>/dev/null
  done
  e2e_log "cleanup: removed volumes: ${vols//$'\n'/ }"
  return 0
}

dump_logs() {
  local g f
  for g in storage consumer-a consumer-b; do
    for f in "$(vm_dir "$g")"/share/out/*.log; do
      [[ -s "$f" ]] || continue
      echo "---- $g: $(basename "$f") (last 15 lines)"
      tail -n 15 "$f"
    done
  done >&2
}

# ------------------------------------------------------------------ guest helpers

gh() { local g="$1"; shift; vm_exec "$g" bash "$GH" "$@"; }
now_us() { e2e__now; }

# csi GUEST ENDPOINT METHOD JSON: prints the JSON response; returns the gRPC code.
csi() {
  local g="$1" ep="$2" method="$3" json="${4-}"
  [[ -n "$json" ]] || json='{}'
  vm_exec "$g" --timeout 180 "$CSI_CALL" --timeout 150 --endpoint "$ep" "$method" "$json"
}
ctl() { csi storage "$CTRL_SOCK" "$@"; }
node_csi() { local g="$1"; shift; csi "$g" "$NODE_SOCK" "$@"; }

cond() { gh storage cond "$1"; }
# wait_cond VOL WANT TIMEOUT_S [T0_US]: prints ms since T0 (guest clock).
wait_cond() {
  local out
  out="$(gh storage wait-cond "$@")" || { echo "$out" >&2; return 1; }
  echo "$out" >&2
  out="${out#ms=}"
  printf '%s\n' "${out%% *}"
}

exports_of() { vm_exec storage exportfs -v; }
# has_rule PATH CLIENT: the knfsd export table has CLIENT for PATH.
has_rule() { gh storage nfs-has "$1" "$2"; }
# event_repairs: how many times the agent repaired exports on a kernel event.
event_repairs() {
  vm_sh storage 'grep -c "exports repaired on a kernel event" /e2e/out/agent.log || true'
}
# wait_until T0_US TIMEOUT_S CMD...: in the storage guest; prints ms since T0.
wait_until() { gh storage wait-until "$@"; }

# ------------------------------------------------------------------ volumes

cap_json() { # KIND: nvme-fs | block | nfs
  case "$1" in
    block) echo '{"block":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}' ;;
    fs) echo '{"mount":{"fsType":"ext4"},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}' ;;
    nfs) echo '{"mount":{"mountFlags":["vers=4.2","actimeo=0"]},"accessMode":{"mode":"MULTI_NODE_MULTI_WRITER"}}' ;;
  esac
}

declare -A V_CAP V_CTX V_BYTES
# create VOL PROTOCOL KIND POOL [EXTRA_PARAMS_JSON_FRAGMENT]: a new, empty
# 64 MiB volume.
create() { create_from "$1" "$2" "$3" "$4" 67108864 null "${5:-}"; }

# create_from VOL PROTOCOL KIND POOL BYTES SOURCE_JSON [EXTRA]: a volume
# restored or cloned from SOURCE ({"snapshot":{"snapshotId":..}} or
# {"volume":{"volumeId":..}}), or an empty one for SOURCE null.
create_from() {
  local vol="$1" proto="$2" kind="$3" pool="$4" bytes="$5" src="$6" extra="${7:-}" cap req resp
  cap="$(cap_json "$kind")"
  req="$(jq -cn --arg n "$vol" --arg p "$proto" --arg pool "$pool" --argjson cap "$cap" \
    --arg ip "$STORAGE_IP" --arg b "$bytes" --argjson src "$src" --argjson extra "{${extra}}" \
    '{name:$n, capacityRange:{requiredBytes:$b}, volumeCapabilities:[$cap],
      parameters:({agent:"storage-1", pool:$pool, protocol:$p, bindAddress:$ip} + $extra)}
     + (if $src == null then {} else {volumeContentSource:$src} end)')"
  local what="CreateVolume $vol"
  [[ "$src" == null ]] || what+=" from $src"
  resp="$(ctl CreateVolume "$req")" || fail "$what"
  V_CAP[$vol]="$cap"
  V_CTX[$vol]="$(jq -c '.volume.volumeContext' <<<"$resp")"
  V_BYTES[$vol]="$(jq -r '.volume.capacityBytes' <<<"$resp")"
  if [[ "$src" == null ]]; then
    step "created $vol ($proto, $kind, pool $pool): $(jq -c . <<<"${V_CTX[$vol]}")"
  else
    step "created $vol from $(jq -c . <<<"$src") ($proto, $kind, pool $pool, ${V_BYTES[$vol]} bytes)"
  fi
}

vctx() { jq -r --arg k "$2" '.[$k] // empty' <<<"${V_CTX[$1]}"; }
staging() { echo "/var/lib/kubelet/plugins/kubernetes.io/csi/pillar-csi.bhyoo.com/$1/globalmount"; }
target() { echo "/var/lib/kubelet/pods/pod-$1/volumes/kubernetes.io~csi/$1/mount"; }

declare -A P_CTX
# attach VOL GUEST: ControllerPublish + NodeStage + NodePublish.
attach() {
  local vol="$1" g="$2" req resp pc
  req="$(jq -cn --arg v "$vol" --arg n "$g" --argjson cap "${V_CAP[$vol]}" --argjson vc "${V_CTX[$vol]}" \
    '{volumeId:$v, nodeId:$n, volumeCapability:$cap, volumeContext:$vc}')"
  resp="$(ctl ControllerPublishVolume "$req")" || fail "ControllerPublishVolume $vol -> $g"
  pc="$(jq -c '.publishContext' <<<"$resp")"
  P_CTX[$vol:$g]="$pc"
  node_stage "$vol" "$g" || return 1
  node_publish "$vol" "$g"
  step "$vol published, staged and mounted on $g at $(target "$vol")"
}

node_publish() { # VOL GUEST: NodePublishVolume of a staged volume, checked
  local vol="$1" g="$2" req
  req="$(jq -cn --arg v "$vol" --arg s "$(staging "$vol")" --arg t "$(target "$vol")" \
    --argjson cap "${V_CAP[$vol]}" --argjson vc "${V_CTX[$vol]}" --argjson pc "${P_CTX[$vol:$g]}" \
    '{volumeId:$v, publishContext:$pc, stagingTargetPath:$s, targetPath:$t, volumeCapability:$cap, volumeContext:$vc}')"
  node_csi "$g" NodePublishVolume "$req" >/dev/null || fail "NodePublishVolume $vol on $g"
}

node_stage() { # VOL GUEST
  local vol="$1" g="$2" req
  req="$(jq -cn --arg v "$vol" --arg s "$(staging "$vol")" --argjson cap "${V_CAP[$vol]}" \
    --argjson vc "${V_CTX[$vol]}" --argjson pc "${P_CTX[$vol:$g]}" \
    '{volumeId:$v, publishContext:$pc, stagingTargetPath:$s, volumeCapability:$cap, volumeContext:$vc}')"
  node_csi "$g" NodeStageVolume "$req" >/dev/null || fail "NodeStageVolume $vol on $g"
}

node_unpublish() { # VOL GUEST
  node_csi "$2" NodeUnpublishVolume "$(jq -cn --arg v "$1" --arg t "$(target "$1")" '{volumeId:$v, targetPath:$t}')" >/dev/null
}
node_unstage() { # VOL GUEST
  node_csi "$2" NodeUnstageVolume "$(jq -cn --arg v "$1" --arg s "$(staging "$1")" '{volumeId:$v, stagingTargetPath:$s}')" >/dev/null
}
ctl_unpublish() { # VOL GUEST
  ctl ControllerUnpublishVolume "$(jq -cn --arg v "$1" --arg n "$2" '{volumeId:$v, nodeId:$n}')" >/dev/null
}
# detach VOL GUEST: the reverse of attach, each step checked.
detach() {
  node_unpublish "$1" "$2" || fail "NodeUnpublishVolume $1 on $2"
  node_unstage "$1" "$2" || fail "NodeUnstageVolume $1 on $2"
  ctl_unpublish "$1" "$2" || fail "ControllerUnpublishVolume $1 $2"
}
delete() {
  ctl DeleteVolume "$(jq -cn --arg v "$1" '{volumeId:$v}')" >/dev/null || fail "DeleteVolume $1"
}

# The consumer-side data path of a published volume: the block device file or
# a file inside the mount.
data_path() { # VOL
  if [[ "${V_CAP[$1]}" == *'"block"'* ]]; then target "$1"; else echo "$(target "$1")/payload"; fi
}
# The storage-side bytes of a block volume (file pool image, LV or zvol).
backing() { # VOL
  local id
  id="$(vctx "$1" agentVolumeID)"
  case "$id" in
    demo/*) echo "$POOL_DIR/${id#*/}.img" ;;
    "$ZFS_DS"/*) echo "/dev/zvol/$id" ;;
    *) echo "/dev/${id%%/*}/${id#*/}" ;;
  esac
}

fill() { gh "$1" fill "$2" "$3"; }        # GUEST PATH MIB -> sha256
sum() { gh "$1" sum "$2" "$3"; }          # GUEST PATH MIB -> sha256
same() { # WHAT A B
  [[ -n "$2" && "$2" == "$3" ]] || fail "$1: checksum $2 != $3"
  step "$1: checksum ok (${2:0:16}...)"
}

# ------------------------------------------------------------------ setup

start_agent() { # [EXTRA_AGENT_FLAGS...]
  vm_exec_bg storage bash "$GH" daemon pillar-agent /e2e/out/agent.log \
    "$AGENT_BIN" --listen=127.0.0.1:9500 \
    --tls-cert=/e2e/certs/agent.crt --tls-key=/e2e/certs/agent.key --tls-ca=/e2e/certs/ca.crt \
    --node-name=storage-1 --pool="demo=file:$POOL_DIR" --pool="$VG=lvm" "${AGENT_POOLS[@]}" \
    --state-dir=/var/lib/pillar-csi/agent --epoch-check-interval=1 \
    --ready-file=/run/pillar-agent.ready --log-level=info "$@" >/dev/null
  gh storage wait-file /run/pillar-agent.ready "$CEILING"
}
stop_agent() {
  gh storage stop pillar-agent
  vm_exec storage rm -f /run/pillar-agent.ready
}

start_controller() {
  vm_exec_bg storage bash "$GH" daemon pillar-controller /e2e/out/controller.log \
    "$CONTROLLER_BIN" --csi-endpoint="$CTRL_SOCK" --registry-listen="$REGISTRY" --registry-insecure \
    --store="$STORE" --agent="storage-1=127.0.0.1:9500" \
    --agent-tls-cert=/e2e/certs/controller.crt --agent-tls-key=/e2e/certs/controller.key \
    --agent-tls-ca=/e2e/certs/ca.crt --resync-interval="$RESYNC" --epoch-poll-interval=1 \
    --ready-file=/run/pillar-controller.ready --log-level=info >/dev/null
  gh storage wait-file /run/pillar-controller.ready "$CEILING"
}

start_node() { # GUEST
  vm_exec_bg "$1" bash "$GH" daemon pillar-node /e2e/out/node.log \
    "$NODE_BIN" --csi-endpoint="$NODE_SOCK" --node-id="$1" --registry-address="$REGISTRY" \
    --registry-insecure --state-dir=/var/lib/pillar-csi/node --identity-interval=2s \
    --selfheal-interval="${PILLAR_E2E_SELFHEAL:-600s}" --device-timeout=30s --log-level=info >/dev/null
  local deadline=$(($(e2e__now) + CEILING * 1000000))
  while (($(e2e__now) < deadline)); do
    if csi storage "$REGISTRY" GetNode "{\"nodeId\":\"$1\"}" >/dev/null 2>&1; then
      return 0
    fi
    e2e__sleep 0.3
  done
  fail "$1: pillar-node did not register with $REGISTRY"
}

setup_storage() {
  vm_sh storage '
    set -e
    mkdir -p /var/lib/pillar-csi/controller /run/pillar "$1" /etc/exports.d
    modprobe -a loop nvmet nvmet-tcp target_core_mod target_core_iblock iscsi_target_mod
    pillar-nfs-server start >/dev/null
    # LVM pool on the data disk.
    disk=/dev/disk/by-id/virtio-pillar-data1
    for _ in $(seq 600); do [[ -e $disk ]] && break; sleep 0.1; done
    pvcreate -q -y "$disk" && vgcreate -q "$2" "$disk" >/dev/null' "$POOL_DIR" "$VG"
  if selected lvm-thin; then setup_thin; fi
  if selected zfs; then setup_zfs; fi
}

# The pools beyond today's, set up only when a selected scenario uses them.
AGENT_POOLS=()
setup_thin() { # a VG on the second data disk, all of it a thin pool
  local t0
  t0=$(e2e__now)
  vm_sh storage '
    set -e
    disk=/dev/disk/by-id/virtio-pillar-data2
    for _ in $(seq 600); do [[ -e $disk ]] && break; sleep 0.1; done
    pvcreate -q -y "$disk" && vgcreate -q "$1" "$disk" >/dev/null
    lvcreate -q -y --type thin-pool -l 100%FREE -n "$2" "$1" >/dev/null' "$THIN_VG" "$THIN_POOL"
  AGENT_POOLS+=("--pool=$THIN_VG=lvm-thin:$THIN_POOL")
  phase_time "setup lvm-thin pool $THIN_VG/$THIN_POOL" "$t0"
}
setup_zfs() { # a pool on the third data disk; the agent's pool is a dataset of it
  local t0
  t0=$(e2e__now)
  # A small ARC: the guest has 768 MiB for the agent, the controller and knfsd too.
  vm_sh storage '
    set -e
    modprobe zfs zfs_arc_max=67108864
    disk=/dev/disk/by-id/virtio-pillar-data3
    for _ in $(seq 600); do [[ -e $disk ]] && break; sleep 0.1; done
    zpool create -f -o ashift=12 -o cachefile=none -O mountpoint=/"$1" "$1" "$disk"
    zfs create "$2"' "$ZPOOL" "$ZFS_DS" || fail "creating the zfs pool $ZPOOL"
  AGENT_POOLS+=("--pool=$ZFS_DS=zfs")
  phase_time "setup zfs pool $ZPOOL ($(vm_exec storage cat /etc/pillar-e2e-zfs | cut -d' ' -f1-2))" "$t0"
}

setup_consumer() { # GUEST
  vm_sh "$1" 'modprobe -a nvme-tcp nvme-fabrics iscsi_tcp sd_mod nfs; mkdir -p /run/pillar'
}

build_binaries() {
  [[ "${PILLAR_E2E_SKIP_BUILD:-0}" == 1 ]] && return 0
  [[ -f "$BUILD/CMakeCache.txt" ]] || cmake -S "$E2E_SRC" -B "$BUILD" -G Ninja >/dev/null
  cmake --build "$BUILD" -j"${PILLAR_E2E_JOBS:-1}" \
    --target pillar-agent pillar-controller pillarctl pillar-node csi-call store-edit fh-forge \
    io-probe >&2
}

# ------------------------------------------------------------------ scenarios

# 1. Create, publish, stage, write, read back: NVMe-oF (ext4, RWO), iSCSI
#    (raw block on an LVM volume, RWO), NFS (RWX on both consumers).

# 16. Snapshots, restores and clones (issue 24) on the run's pools: data
#     written through consumer-a, a snapshot, the source overwritten; a
#     restore into a larger volume, published to consumer-b, reads the
#     snapshot's data; a clone of the source diverges on its own; the source
#     deleted, then the snapshot while the restore exists: the restore's data
#     intact, the snapshot in no listing and nothing of it left on the pool
#     once the restore is gone too. NFS (a dataset or a directory tree) the
#     same way, on the pool NFS volumes use.
s16() {
  local w1 w2 w3 r snap size listed
  create s16-src nvmeof-tcp block "$POOL_BLOCK"
  attach s16-src consumer-a
  w1="$(fill consumer-a "$(data_path s16-src)" 8)"
  snap="$(ctl CreateSnapshot '{"name":"s16-snap","sourceVolumeId":"s16-src"}')" ||
    fail "CreateSnapshot s16-snap"
  size="$(jq -r '.snapshot.sizeBytes' <<<"$snap")"
  [[ "$(jq -r '.snapshot.readyToUse' <<<"$snap")" == true ]] || fail "s16-snap not ready: $snap"
  [[ "$size" == "${V_BYTES[s16-src]}" ]] || fail "s16-snap size $size != the source's ${V_BYTES[s16-src]}"
  step "s16-snap taken: ready, $size bytes"
  # A detached snapshot of the same point in time: it keeps nothing of the
  # source alive (ZFS: sent into a dataset of its own).
  snap="$(ctl CreateSnapshot '{"name":"s16-dsnap","sourceVolumeId":"s16-src","parameters":{"detached":"true"}}')" ||
    fail "CreateSnapshot s16-dsnap (detached)"
  [[ "$(jq -r '.snapshot.readyToUse' <<<"$snap")" == true ]] || fail "s16-dsnap not ready: $snap"
  step "s16-dsnap (detached) taken: ready"
  w2="$(fill consumer-a "$(data_path s16-src)" 8)"

  create_from s16-restore nvmeof-tcp block "$POOL_BLOCK" "$((2 * size))" \
    '{"snapshot":{"snapshotId":"s16-snap"}}'
  [[ "${V_BYTES[s16-restore]}" -ge $((2 * size)) ]] || fail "restore not grown: ${V_BYTES[s16-restore]}"
  attach s16-restore consumer-b
  r="$(sum consumer-b "$(data_path s16-restore)" 8)"
  same "restore on consumer-b vs the data at snapshot time" "$w1" "$r"
  r="$(vm_exec consumer-b blockdev --getsize64 "$(data_path s16-restore)")"
  [[ "$r" -ge $((2 * size)) ]] || fail "consumer-b sees $r bytes, not the larger size"

  create_from s16-clone nvmeof-tcp block "$POOL_BLOCK" "$size" '{"volume":{"volumeId":"s16-src"}}'
  attach s16-clone consumer-b
  r="$(sum consumer-b "$(data_path s16-clone)" 8)"
  same "clone vs the source now" "$w2" "$r"
  w3="$(fill consumer-b "$(data_path s16-clone)" 8)"
  r="$(sum consumer-a "$(data_path s16-src)" 8)"
  same "source after the clone was written" "$w2" "$r"

  detach s16-src consumer-a
  delete s16-src
  listed="$(ctl ListSnapshots '{}' | jq -r '[.entries[]?.snapshot.snapshotId] | sort | join(",")')"
  [[ "$listed" == s16-dsnap,s16-snap ]] || fail "after the source's delete, snapshots listed: '$listed'"
  ctl DeleteSnapshot '{"snapshotId":"s16-snap"}' >/dev/null || fail "DeleteSnapshot s16-snap"
  # The detached snapshot outlives its source and its sibling; a detached
  # restore of it (a full copy) reads the data of snapshot time, then the
  # snapshot goes with the restore still intact.
  create_from s16-drestore nvmeof-tcp block "$POOL_BLOCK" "$size" \
    '{"snapshot":{"snapshotId":"s16-dsnap"}}' '"detached":"true"'
  attach s16-drestore consumer-a
  ctl DeleteSnapshot '{"snapshotId":"s16-dsnap"}' >/dev/null || fail "DeleteSnapshot s16-dsnap"
  vm_exec consumer-a sh -c 'echo 3 >/proc/sys/vm/drop_caches'
  r="$(sum consumer-a "$(data_path s16-drestore)" 8)"
  same "detached restore of the detached snapshot, after its source and snapshot went" "$w1" "$r"
  detach s16-drestore consumer-a
  delete s16-drestore
  listed="$(ctl ListSnapshots '{}' | jq -r '[.entries[]?.snapshot.snapshotId] | join(",")')"
  [[ -z "$listed" ]] || fail "snapshots still listed after DeleteSnapshot: '$listed'"
  [[ "$(vm_exec storage "$PILLARCTL" --store="$STORE" get snapshots | tail -n +2)" == "" ]] ||
    fail "a PillarSnapshot is left: $(vm_exec storage "$PILLARCTL" --store="$STORE" get snapshots)"
  step "source and snapshot deleted; no snapshot listed or recorded"
  vm_exec consumer-b sh -c 'echo 3 >/proc/sys/vm/drop_caches'
  r="$(sum consumer-b "$(data_path s16-restore)" 8)"
  same "restore after its source and snapshot were deleted" "$w1" "$r"
  r="$(sum consumer-b "$(data_path s16-clone)" 8)"
  same "clone after its source was deleted" "$w3" "$r"

  # NFS: the tree as it was, on the pool NFS volumes use (lvm-thin runs use
  # the file pool, which the run on today's pools covers).
  if [[ "$POOL_NFS" != demo || "$POOL_BLOCK" == demo ]]; then
    create s16-nfs nfs nfs "$POOL_NFS" '"nfsRootSquash":"false"'
    attach s16-nfs consumer-a
    w1="$(fill consumer-a "$(data_path s16-nfs)" 4)"
    ctl CreateSnapshot '{"name":"s16-nfs-snap","sourceVolumeId":"s16-nfs"}' >/dev/null ||
      fail "CreateSnapshot s16-nfs-snap"
    fill consumer-a "$(data_path s16-nfs)" 4 >/dev/null
    create_from s16-nfs-restore nfs nfs "$POOL_NFS" 67108864 '{"snapshot":{"snapshotId":"s16-nfs-snap"}}' \
      '"nfsRootSquash":"false"'
    attach s16-nfs-restore consumer-b
    r="$(sum consumer-b "$(data_path s16-nfs-restore)" 4)"
    same "nfs restore vs the tree at snapshot time" "$w1" "$r"
    detach s16-nfs-restore consumer-b
    detach s16-nfs consumer-a
    ctl DeleteSnapshot '{"snapshotId":"s16-nfs-snap"}' >/dev/null || fail "DeleteSnapshot s16-nfs-snap"
    delete s16-nfs
    delete s16-nfs-restore
  fi

  detach s16-restore consumer-b
  detach s16-clone consumer-b
  delete s16-restore
  delete s16-clone
  # Nothing of any of them on the storage: space reclaimed.
  local left
  case "$POOL_BLOCK" in
    "$ZFS_DS") left="$(vm_exec storage zfs list -H -t all -o name -r "$ZFS_DS" | grep s16 || true)" ;;
    "$THIN_VG") left="$(vm_exec storage lvs --noheadings -o lv_name "$THIN_VG" | grep s16 || true)" ;;
    *) left="$(vm_sh storage 'find "$1" -name "*s16*"' "$POOL_DIR" || true)" ;;
  esac
  [[ -z "$left" ]] || fail "left on the storage after every delete: $left"
  step "nothing of s16 left on pool $POOL_BLOCK"
}
s1() {
  create s1-nvme nvmeof-tcp fs "$POOL_BLOCK"
  create s1-iscsi iscsi block "$POOL_LV"
  create s1-nfs nfs nfs "$POOL_NFS" '"nfsRootSquash":"false"' # writes as root: opts out of root_squash
  attach s1-nvme consumer-a
  local w r
  w="$(fill consumer-a "$(data_path s1-nvme)" 8)"
  vm_exec consumer-a sh -c 'echo 3 >/proc/sys/vm/drop_caches'
  r="$(sum consumer-a "$(data_path s1-nvme)" 8)"
  same "nvme ext4 file, written vs read back" "$w" "$r"
  # A second node is refused for a single-node volume.
  if ctl ControllerPublishVolume "$(jq -cn --argjson cap "${V_CAP[s1-nvme]}" '{volumeId:"s1-nvme", nodeId:"consumer-b", volumeCapability:$cap}')" 2>/dev/null; then
    fail "s1-nvme (RWO) was published to a second node"
  fi
  step "RWO volume refused for a second node"
  # The kernel target itself refuses a host that is not in the ACL: consumer-b
  # dials s1-nvme directly with its own host NQN.
  local nqn addr port
  nqn="$(vctx s1-nvme targetID)" addr="$(vctx s1-nvme address)" port="$(vctx s1-nvme port)"
  if vm_exec consumer-b nvme connect -t tcp -a "$addr" -s "$port" -n "$nqn" >/dev/null 2>&1; then
    vm_exec consumer-b nvme disconnect -n "$nqn" >/dev/null 2>&1 || true
    fail "nvmet admitted consumer-b, which is not in s1-nvme's ACL"
  fi
  step "nvmet refused consumer-b's host NQN (not in the ACL)"

  attach s1-iscsi consumer-b
  w="$(fill consumer-b "$(data_path s1-iscsi)" 8)"
  r="$(sum consumer-b "$(data_path s1-iscsi)" 8)"
  same "iscsi block, written vs read back" "$w" "$r"
  r="$(sum storage "$(backing s1-iscsi)" 8)"
  same "iscsi block, written vs backend LV $(backing s1-iscsi)" "$w" "$r"

  attach s1-nfs consumer-a
  attach s1-nfs consumer-b
  w="$(fill consumer-a "$(data_path s1-nfs)" 4)"
  r="$(sum consumer-b "$(data_path s1-nfs)" 4)"
  same "nfs, written on consumer-a vs read on consumer-b" "$w" "$r"
  r="$(sum storage "$(vctx s1-nfs targetID)/payload" 4)"
  same "nfs, written vs server file" "$w" "$r"
  has_rule "$(vctx s1-nfs targetID)" "$A_IP" && has_rule "$(vctx s1-nfs targetID)" "$B_IP" ||
    fail "nfs rules for both consumers missing: $(exports_of)"

  detach s1-nfs consumer-b
  detach s1-nfs consumer-a
  detach s1-iscsi consumer-b
  detach s1-nvme consumer-a
  delete s1-nfs
  delete s1-iscsi
  delete s1-nvme
  step "all unpublished and deleted"
  [[ "$(vm_exec consumer-a nvme list-subsys -o json 2>/dev/null)" != *s1-nvme* ]] ||
    fail "consumer-a still has the s1-nvme subsystem connected"
}

# 2. Target state lost, with a consumer connected and I/O in flight:
#    (a) nvmet module reload (configfs wiped + rmmod) under a mounted NVMe-oF
#        volume; (b) the agent restarts with LIO and the NFS export table
#        wiped (a storage-node "reboot" without rebooting the guest).
#    ExportReconciled returns to True without restarting anything else; the
#    consumers' I/O resumes with the same data.
s2() {
  create s2-nvme nvmeof-tcp fs "$POOL_BLOCK"
  create s2-iscsi iscsi block "$POOL_BLOCK"
  create s2-nfs nfs nfs "$POOL_NFS" '"nfsRootSquash":"false"' # writes as root: opts out of root_squash
  attach s2-nvme consumer-a
  attach s2-iscsi consumer-b
  attach s2-nfs consumer-a
  local wn wi wf r t0 ms nqn
  wn="$(fill consumer-a "$(data_path s2-nvme)" 4)"
  wi="$(fill consumer-b "$(data_path s2-iscsi)" 4)"
  wf="$(fill consumer-a "$(data_path s2-nfs)" 4)"
  nqn="$(vctx s2-nvme targetID)"
  vm_exec consumer-a nvme list-subsys -o json | grep -q "$nqn" || fail "consumer-a is not connected to $nqn"
  step "consumer-a connected to $nqn"

  # (a) nvmet reload.
  t0=$(gh storage now)
  gh storage nvmet-unload
  step "nvmet configfs cleared and nvmet_tcp + nvmet unloaded"
  # A read issued while the target is gone: it must complete once the
  # controller has rebuilt the export and the host has reconnected.
  local rid
  rid="$(vm_exec_bg consumer-a bash "$GH" sum "$(data_path s2-nvme)" 4)"
  # The condition may stay True throughout: the reconciler notices the new
  # boot epoch and repairs in the same pass. What counts is the rebuilt export.
  ms="$(wait_until "$t0" "$CEILING" bash -c '[[ -L "/sys/kernel/config/nvmet/subsystems/$1/allowed_hosts/$2" ]] &&
    ls /sys/kernel/config/nvmet/ports/*/subsystems/ | grep -qxF "$1" &&
    [[ "$(cat "/sys/kernel/config/nvmet/subsystems/$1/namespaces/1/enable")" == 1 ]]' bash "$nqn" "$(vm_hostnqn consumer-a)")" ||
    fail "nvmet export of $nqn not rebuilt (port link, namespace, consumer-a's host NQN)"
  metric "s2a nvmet reload -> export rebuilt (port, namespace, ACL)" "$ms"
  ms="$(wait_cond s2-nvme True/Reconciled "$CEILING" "$t0")"
  metric "s2a nvmet reload -> ExportReconciled=True" "$ms"
  r="$(vm_bg_wait consumer-a "$rid" "$CEILING")" || fail "the read issued during the outage failed"
  metric "s2a nvmet reload -> in-flight read completed" "$((($(gh consumer-a now) - t0) / 1000))"
  same "nvme data after the reload (read issued during the outage)" "$wn" "$r"
  r="$(sum consumer-a "$(data_path s2-nvme)" 4)"
  same "nvme data after the reload" "$wn" "$r"

  # (b) agent restart with the kernel state wiped under it.
  t0=$(gh storage now)
  stop_agent
  vm_sh storage 'bash "$1" lio-clear && exportfs -ua' "$GH"
  ms="$(wait_cond s2-iscsi False/AgentUnavailable "$CEILING" "$t0")"
  step "ExportReconciled=False/AgentUnavailable after ${ms} ms"
  start_agent
  ms="$(wait_cond s2-iscsi True/Reconciled "$CEILING" "$t0")"
  metric "s2b agent restart + LIO wiped -> iscsi ExportReconciled=True" "$ms"
  ms="$(wait_cond s2-nfs True/Reconciled "$CEILING" "$t0")"
  metric "s2b agent restart + exports wiped -> nfs ExportReconciled=True" "$ms"
  ms="$(wait_cond s2-nvme True/Reconciled "$CEILING" "$t0")"
  r="$(vm_exec consumer-b --timeout 150 bash "$GH" sum "$(data_path s2-iscsi)" 4)" || fail "iscsi read after the restart"
  metric "s2b agent restart -> iscsi read completed" "$((($(gh consumer-b now) - t0) / 1000))"
  same "iscsi data after the agent restart" "$wi" "$r"
  r="$(vm_exec consumer-a --timeout 150 bash "$GH" sum "$(data_path s2-nfs)" 4)" || fail "nfs read after the restart"
  metric "s2b agent restart -> nfs read completed" "$((($(gh consumer-a now) - t0) / 1000))"
  same "nfs data after the agent restart" "$wf" "$r"
  has_rule "$(vctx s2-nfs targetID)" "$A_IP" || fail "nfs rule for consumer-a not rebuilt"
  r="$(sum consumer-a "$(data_path s2-nvme)" 4)"
  same "nvme data after the agent restart" "$wn" "$r"
  gh storage running pillar-controller || fail "the controller is not running"

  detach s2-nvme consumer-a
  detach s2-iscsi consumer-b
  detach s2-nfs consumer-a
  delete s2-nvme
  delete s2-iscsi
  delete s2-nfs
}

# 3. Out-of-band deletion of one consumer's ACL entry (nvmet allowed_hosts
#    link, LIO node ACL, knfsd rule): repaired by the periodic resync (nothing
#    changed in the store, so nothing else can notice). Normally within one
#    jittered interval (5-6 s) plus a pass; the scenario waits for the repair
#    (ceiling CEILING) and prints the time it took as a figure.
s3() {
  create s3-nvme nvmeof-tcp block "$POOL_BLOCK"
  create s3-iscsi iscsi block "$POOL_BLOCK"
  create s3-nfs nfs nfs "$POOL_NFS" '"nfsRootSquash":"false"' # writes as root: opts out of root_squash
  attach s3-nvme consumer-a
  attach s3-iscsi consumer-a
  attach s3-nfs consumer-a
  attach s3-nfs consumer-b
  local w r t0 ms nqn iqn path hostnqn initiator
  nqn="$(vctx s3-nvme targetID)"
  iqn="$(vctx s3-iscsi targetID)"
  path="$(vctx s3-nfs targetID)"
  hostnqn="$(vm_hostnqn consumer-a)"
  initiator="$(vm_iqn consumer-a)"
  w="$(fill consumer-a "$(data_path s3-nvme)" 2)"

  # nvmet: the allowed_hosts link.
  local link="/sys/kernel/config/nvmet/subsystems/$nqn/allowed_hosts/$hostnqn"
  t0=$(gh storage now)
  vm_exec storage rm "$link"
  ms="$(wait_until "$t0" "$CEILING" test -L "$link")" || fail "allowed_hosts link not restored within ${CEILING} s"
  metric "s3 nvmet link restored" "$ms"
  ms="$(wait_cond s3-nvme True/Reconciled "$CEILING" "$t0")"
  metric "s3 nvmet ACL deleted -> ExportReconciled=True" "$ms"
  # A fresh connection (what a new mount does) is admitted again.
  vm_sh consumer-a 'nvme disconnect -n "$1" >/dev/null' "$nqn"
  node_stage s3-nvme consumer-a
  r="$(sum consumer-a "$(data_path s3-nvme)" 2)"
  same "nvme data through a fresh connection after the repair" "$w" "$r"

  # LIO: the node ACL of consumer-a (its session is dropped by the target).
  w="$(fill consumer-a "$(data_path s3-iscsi)" 2)"
  local acl="/sys/kernel/config/target/iscsi/$iqn/tpgt_1/acls/$initiator" attempt
  # The ACL goes in steps (its mapped LUN first): a resync that lands between
  # them maps the LUN again and the ACL cannot go; then delete it again.
  for attempt in 1 2 3; do
    t0=$(gh storage now)
    if vm_sh storage '
      for l in "$1"/lun_*/; do for x in "$l"*; do [[ -L $x ]] && rm -f "$x"; done; rmdir "$l"; done
      rmdir "$1" 2>/dev/null' "$acl"; then
      break
    fi
    [[ $attempt -lt 3 ]] || fail "could not delete the LIO node ACL: a resync repaired it each time"
    step "attempt $attempt: a resync mapped the LUN again before the ACL went; deleting again"
    vm_sh storage 'for _ in $(seq 100); do [[ -L "$(ls -d "$1"/lun_*/* 2>/dev/null | head -1)" ]] && exit 0; sleep 0.1; done' "$acl"
  done
  ms="$(wait_until "$t0" "$CEILING" bash -c 'for l in "$1"/lun_*/*; do [[ -L $l ]] && exit 0; done; exit 1' bash "$acl")" ||
    fail "LIO node ACL not restored within ${CEILING} s"
  metric "s3 LIO node ACL (with mapped LUN) restored" "$ms"
  r="$(vm_exec consumer-a --timeout 150 bash "$GH" sum "$(data_path s3-iscsi)" 2)" || fail "iscsi read after the ACL repair"
  metric "s3 LIO ACL deleted -> consumer read completed" "$((($(gh consumer-a now) - t0) / 1000))"
  same "iscsi data after the ACL repair" "$w" "$r"

  # knfsd: consumer-a's rule; consumer-b's rule must stay.
  w="$(fill consumer-a "$(data_path s3-nfs)" 2)"
  # The agent watches the export table (s13), so it may put the rule back
  # before the check below runs: then its log must show that repair.
  local repairs_before repairs_after
  repairs_before="$(event_repairs)"
  t0=$(gh storage now)
  vm_exec storage exportfs -u "$A_IP:$path"
  if has_rule "$path" "$A_IP"; then
    repairs_after="$(event_repairs)"
    ((repairs_after > repairs_before)) ||
      fail "exportfs -u did not remove the rule and the agent reported no repair"
    step "the agent repaired the rule on the etab event before the check saw it gone"
  fi
  ms="$(wait_until "$t0" "$CEILING" bash "$GH" nfs-has "$path" "$A_IP")" ||
    fail "nfs rule for $A_IP not restored within ${CEILING} s: $(exports_of)"
  metric "s3 knfsd rule (exportfs -u) restored" "$ms"
  has_rule "$path" "$B_IP" || fail "consumer-b's rule was lost"
  r="$(sum consumer-b "$(data_path s3-nfs)" 2)"
  same "nfs data on consumer-b after consumer-a's repair" "$w" "$r"
  r="$(sum consumer-a "$(data_path s3-nfs)" 2)"
  same "nfs data on consumer-a after the repair" "$w" "$r"

  detach s3-nfs consumer-b
  detach s3-nfs consumer-a
  detach s3-iscsi consumer-a
  detach s3-nvme consumer-a
  delete s3-nvme
  delete s3-iscsi
  delete s3-nfs
}

# 4. consumer-a's IP changes while an NFS volume is published to it (and to
#    consumer-b): pillar-node re-reports, the rule follows; consumer-b's
#    unpublish in the meantime leaves consumer-a's rule alone.
#    If pillar-node does not get its new identity to the registry in time,
#    the scenario fails (that is a node plugin bug) but still checks the
#    controller side, re-registering consumer-a directly through csi-call.
s4() {
  create s4-nfs nfs nfs "$POOL_NFS" '"nfsRootSquash":"false"' # writes as root: opts out of root_squash
  attach s4-nfs consumer-a
  attach s4-nfs consumer-b
  local w r t0 ms path node_ok=1 id
  path="$(vctx s4-nfs targetID)"
  w="$(fill consumer-a "$(data_path s4-nfs)" 2)"
  # consumer-b's detach below runs before the waits start polling: the
  # figures come from the controller's log (the storage guest's clock, as
  # t0), the waits only check that it happened.
  local clog skip us nlog nskip when t_seen=
  clog="$(vm_dir storage)/share/out/controller.log"
  skip="$(wc -l <"$clog")"
  nlog="$(vm_dir consumer-a)/share/out/node.log"
  nskip="$(wc -l <"$nlog")"
  when="$(vm_dir consumer-a)/s4-ip-changed"
  t0=$(gh storage now)
  vm_set_ip consumer-a eth0 "$A_IP2/24" "$when"
  step "consumer-a is now $A_IP2"
  # In the meantime consumer-b goes away.
  detach s4-nfs consumer-b
  step "consumer-b unpublished"
  local treg
  if ms="$(wait_until "$t0" 90 bash -c '"$1" --endpoint "$2" GetNode "{\"nodeId\":\"consumer-a\"}" | grep -q "\"$3\""' \
    bash "$CSI_CALL" "$REGISTRY" "$A_IP2")"; then
    # A known node's new address is logged as its identity changing.
    if us="$(log_us "$clog" "$skip" '"msg":"node identity changed"' '"node":"consumer-a"' "\"$A_IP2\"")"; then
      ms=$(((us - t0) / 1000))
      t_seen=$us
    fi
    metric "s4 IP change -> pillar-node re-reported its address" "$ms"
    treg=$t0
  else
    node_ok=0
    step "BUG: pillar-node did not re-report $A_IP2 within 90 s; its log says:"
    grep 'identity report failed' "$(vm_dir consumer-a)/share/out/node.log" | tail -2 | sed 's/^/      /'
    id="$(csi storage "$REGISTRY" GetNode '{"nodeId":"consumer-a"}' | jq -c --arg ip "$A_IP2" '{identity:(.identity | .ipAddresses = [$ip])}')"
    treg=$(gh storage now)
    csi consumer-a "$REGISTRY" RegisterNode "$id" >/dev/null || fail "direct RegisterNode from consumer-a"
    step "re-registered consumer-a ($A_IP2) directly with csi-call (fresh connection) to check the controller side"
  fi
  ms="$(wait_until "$treg" "$CEILING" bash -c 'bash "$1" nfs-has "$2" "$3" && ! bash "$1" nfs-has "$2" "$4"' \
    bash "$GH" "$path" "$A_IP2" "$A_IP")" || fail "the rule did not follow consumer-a to $A_IP2: $(exports_of)"
  local t_fix=
  if ((node_ok)) && us="$(log_us "$clog" "$skip" '"msg":"export repaired"' '"volume":"s4-nfs"' "$A_IP2")"; then
    ms=$(((us - t0) / 1000))
    t_fix=$us
  fi
  metric "s4 $( ((node_ok)) && echo 'IP change' || echo 'direct re-registration') -> NFS rule follows (new IP in, old IP out)" "$ms"
  # The same path in two halves, each on one guest's clock (the figures above
  # start before the harness's command reaches the guest, which takes seconds
  # under emulation): the address in place -> pillar-node's report (consumer's
  # clock), and the controller learning it -> the rule repaired (storage's).
  local t_ip t_rep
  if ((node_ok)) && t_ip="$(<"$when")" && [[ $t_ip =~ ^[0-9]+$ ]] &&
    t_rep="$(log_us "$nlog" "$nskip" '"msg":"node identity reported"' "\"$A_IP2\"")"; then
    metric "s4 address in place -> pillar-node reported it (consumer's clock)" "$(((t_rep - t_ip) / 1000))"
  fi
  if [[ -n $t_seen && -n $t_fix ]]; then
    metric "s4 controller learned the address -> NFS rule follows (storage's clock)" "$(((t_fix - t_seen) / 1000))"
  fi
  has_rule "$path" "$A_IP2" || fail "no rule for $A_IP2 on $path"
  has_rule "$path" "$B_IP" && fail "consumer-b's rule survived its unpublish"
  cond s4-nfs | grep -qx True/Reconciled || fail "s4-nfs not Reconciled: $(cond s4-nfs)"
  step "rule for $A_IP2 present, $A_IP and consumer-b's $B_IP gone, ExportReconciled=True"
  r="$(vm_exec consumer-a --timeout 150 bash "$GH" sum "$(data_path s4-nfs)" 2)" || fail "read from the new IP"
  same "nfs data read from consumer-a's new IP" "$w" "$r"
  w="$(fill consumer-a "$(data_path s4-nfs)" 2)"
  r="$(sum storage "$path/payload" 2)"
  same "nfs data written from the new IP vs server file" "$w" "$r"

  vm_set_ip consumer-a eth0 "$A_IP/24"
  if [[ $node_ok -eq 0 ]]; then
    # Once A_IP is back, the stuck connection revives and delivers the
    # RegisterNode calls pillar-node gave up on (carrying A_IP2); pillar-node
    # itself still believes A_IP is registered (its last success) and never
    # corrects it. A fresh plugin process reports the truth.
    e2e__sleep 3
    gh consumer-a stop pillar-node
    start_node consumer-a
    wait_until "$(gh storage now)" "$CEILING" bash -c '"$1" --endpoint "$2" GetNode "{\"nodeId\":\"consumer-a\"}" | grep -q "\"$3\""' \
      bash "$CSI_CALL" "$REGISTRY" "$A_IP" >/dev/null || fail "consumer-a not re-registered at $A_IP"
    step "pillar-node on consumer-a restarted; registered at $A_IP again"
  fi
  detach s4-nfs consumer-a
  delete s4-nfs
  [[ $node_ok -eq 1 ]] || fail "pillar-node never re-reported consumer-a's new address (registry RPCs time out on the connection from the old address)"
}

# 5. A namespace comes back on an already-connected subsystem and its
#    notification is missed: NodeStageVolume recovers it with ns-rescan.
#    Pillar exports one subsystem per volume (namespace 1), so the case is:
#    volume staged, its namespace disabled and re-enabled on the target while
#    the host's controller stays connected, and the host never hears of the
#    re-enable. The miss is made real on the host side: Set Features
#    "Asynchronous Event Configuration" (FID 0x0b) = 0 on the host's
#    controller makes nvmet skip the Namespace Attribute Changed AEN
#    (nvmet_ns_changed -> nvmet_aen_bit_disabled), exactly a lost notice.
s5() {
  create s5-nvme nvmeof-tcp block "$POOL_BLOCK"
  attach s5-nvme consumer-a
  local w r t0 ms nqn ns dev attempt ok=0
  nqn="$(vctx s5-nvme targetID)"
  ns="/sys/kernel/config/nvmet/subsystems/$nqn/namespaces/1"
  w="$(fill consumer-a "$(data_path s5-nvme)" 2)"
  local round found
  # A round sets the fault up and watches the host miss the re-enable; when
  # the host found the namespace anyway (a notice it got all the same, e.g.
  # the re-enable landed before its AEN was off), the fault is set up again.
  for round in 1 2 3; do
    ok=0
    for attempt in 1 2 3 4; do
      # The host sees the namespace go (its AEN is still on), then stops
      # listening; the reconciler re-enables the namespace within a resync.
      gh consumer-a nvme-dev "$nqn" >/dev/null || fail "no device for $nqn before the fault"
      vm_exec storage sh -c "echo 0 >$ns/enable"
      if vm_sh consumer-a '
        nqn=$1
        for _ in $(seq 100); do bash "$2" nvme-dev "$nqn" >/dev/null || break; sleep 0.02; done
        bash "$2" nvme-dev "$nqn" >/dev/null && exit 1
        for c in /sys/class/nvme-fabrics/ctl/nvme*; do
          [[ "$(cat "$c/subsysnqn" 2>/dev/null)" == "$nqn" ]] || continue
          nvme set-feature "/dev/${c##*/}" --feature-id=0x0b --value=0 >/dev/null || exit 2
        done
        exit 0' "$nqn" "$GH"; then
        ok=1
        break
      fi
      step "attempt $attempt: the reconciler re-enabled the namespace before the host dropped it; retrying"
      vm_sh consumer-a 'for _ in $(seq 100); do bash "$2" nvme-dev "$1" >/dev/null && exit 0; sleep 0.1; done; nvme ns-rescan /dev/nvme0 2>/dev/null; exit 0' "$nqn" "$GH"
    done
    [[ $ok -eq 1 ]] || fail "could not get the namespace removed on the host"
    step "namespace 1 disabled on the target; consumer-a dropped its device; AEN config = 0 on its controller"
    t0=$(gh storage now)
    vm_sh storage 'for _ in $(seq 1200); do [[ "$(cat "$1/enable")" == 1 ]] && exit 0; sleep 0.1; done; exit 1' "$ns" ||
      fail "the reconciler did not re-enable namespace 1"
    ms="$(wait_cond s5-nvme True/Reconciled "$CEILING" "$t0")"
    step "namespace re-enabled by the reconciler; ExportReconciled=True"
    # The notice is missed: several seconds later the host still has no device.
    e2e__sleep 6
    found=0
    vm_exec consumer-a bash "$GH" nvme-dev "$nqn" >/dev/null && found=1
    [[ $found -eq 1 ]] || break
    [[ $round -lt 3 ]] || fail "the host found the namespace without a rescan in 3 rounds: the AEN was not suppressed (scenario not exercised)"
    step "round $round: the host found the namespace without a rescan; setting the fault up again"
  done
  vm_exec consumer-a nvme list-subsys -o json | grep -q "$nqn" || fail "the subsystem is no longer connected"
  step "6 s later: subsystem connected, namespace device still missing (notification missed)"
  t0=$(gh consumer-a now)
  node_stage s5-nvme consumer-a
  metric "s5 NodeStageVolume on connected subsystem, device missing -> staged" "$((($(gh consumer-a now) - t0) / 1000))"
  dev="$(vm_exec consumer-a bash "$GH" nvme-dev "$nqn")" || fail "still no device after NodeStageVolume"
  grep -q 'rescanned' "$(vm_dir consumer-a)/share/out/node.log" || fail "pillar-node did not log an ns-rescan"
  step "device $dev back (pillar-node: $(grep -c 'rescanned' "$(vm_dir consumer-a)/share/out/node.log") rescan log line(s))"
  node_unpublish s5-nvme consumer-a || fail "NodeUnpublishVolume"
  node_csi consumer-a NodePublishVolume "$(jq -cn --arg s "$(staging s5-nvme)" --arg t "$(target s5-nvme)" --argjson cap "${V_CAP[s5-nvme]}" --argjson pc "${P_CTX[s5-nvme:consumer-a]}" '{volumeId:"s5-nvme", publishContext:$pc, stagingTargetPath:$s, targetPath:$t, volumeCapability:$cap}')" >/dev/null ||
    fail "NodePublishVolume after the recovery"
  r="$(sum consumer-a "$(data_path s5-nvme)" 2)"
  same "nvme data after the rescan" "$w" "$r"
  detach s5-nvme consumer-a
  delete s5-nvme
}

# 6. Access revoked while mounted: consumer-b's publication of an NFS volume
#    is revoked (its rule removed) while it still has the volume mounted; the
#    mount point cannot be stat'ed; NodeUnpublishVolume and
#    NodeUnstageVolume still complete. (ControllerUnpublish is the revoke, so
#    the reconciler does not put the rule back under the test.)
s6() {
  create s6-nfs nfs nfs "$POOL_NFS" '"nfsRootSquash":"false"' # writes as root: opts out of root_squash
  attach s6-nfs consumer-a
  attach s6-nfs consumer-b
  local path w r t
  path="$(vctx s6-nfs targetID)"
  t="$(target s6-nfs)"
  w="$(fill consumer-b "$(data_path s6-nfs)" 1)"
  ctl_unpublish s6-nfs consumer-b || fail "ControllerUnpublishVolume consumer-b"
  has_rule "$path" "$B_IP" && fail "consumer-b's rule is still there"
  step "consumer-b's rule removed while mounted"
  if vm_exec consumer-b --timeout 60 stat "$t" >/dev/null 2>&1 && vm_exec consumer-b --timeout 60 stat "$t/payload" >/dev/null 2>&1; then
    fail "consumer-b can still stat the revoked mount"
  fi
  step "stat on consumer-b fails: $(vm_exec consumer-b --timeout 60 stat "$t/payload" 2>&1 | tail -1 || true)"
  local stats
  stats="$(node_csi consumer-b NodeGetVolumeStats "$(jq -cn --arg t "$t" '{volumeId:"s6-nfs", volumePath:$t}')")" ||
    fail "NodeGetVolumeStats failed"
  step "NodeGetVolumeStats: $(jq -c .volumeCondition <<<"$stats")"
  [[ "$(jq -r .volumeCondition.abnormal <<<"$stats")" == true ]] || fail "volume condition not abnormal"
  node_unpublish s6-nfs consumer-b || fail "NodeUnpublishVolume on a revoked mount"
  node_unstage s6-nfs consumer-b || fail "NodeUnstageVolume on a revoked mount"
  vm_sh consumer-b '! grep -q " $1 \| $2 " /proc/self/mountinfo' "$t" "$(staging s6-nfs)" || fail "consumer-b still has a mount"
  step "NodeUnpublishVolume and NodeUnstageVolume completed; no mount left on consumer-b"
  r="$(sum consumer-a "$(data_path s6-nfs)" 1)"
  same "nfs data on consumer-a, unaffected" "$w" "$r"
  detach s6-nfs consumer-a
  delete s6-nfs
}

# 7. A volume without exportSpec (provisioned "before it was recorded") after
#    target state loss: ExportSpecMissing, untouched over several resyncs;
#    pillarctl repair export-spec brings it back; data intact.
s7() {
  create s7-nvme nvmeof-tcp block "$POOL_BLOCK"
  attach s7-nvme consumer-a
  local w r t0 ms nqn uid
  nqn="$(vctx s7-nvme targetID)"
  w="$(fill consumer-a "$(data_path s7-nvme)" 4)"
  r="$(sum storage "$(backing s7-nvme)" 4)"
  same "nvme block vs backend image" "$w" "$r"
  vm_exec storage "$STORE_EDIT" --store "$STORE" strip-export-spec s7-nvme
  wait_cond s7-nvme False/ExportSpecMissing "$CEILING" >/dev/null
  vm_sh storage '[[ -d "/sys/kernel/config/nvmet/subsystems/$1" ]]' "$nqn" || fail "the live export was touched"
  step "ExportSpecMissing; the live export is left as it is"
  gh storage nvmet-unload
  step "target state lost (nvmet cleared and unloaded)"
  local hold=$((RESYNC * 3 + 2))
  gh storage hold-cond s7-nvme False/ExportSpecMissing "$hold" || fail "the condition changed"
  vm_sh storage '[[ ! -d "/sys/kernel/config/nvmet/subsystems/$1" ]]' "$nqn" ||
    fail "an export was created for a volume without exportSpec"
  step "${hold} s (3 resyncs): still ExportSpecMissing, no export guessed"
  uid="$(vm_exec storage "$STORE_EDIT" --store "$STORE" get PillarVolumeState s7-nvme | jq -r .metadata.uid)"
  t0=$(gh storage now)
  vm_exec storage --timeout 180 "$PILLARCTL" --store="$STORE" repair export-spec s7-nvme \
    --bind-address="$STORAGE_IP" --port=4420 --acl-enabled=true --expect-uid="$uid" \
    --backup-dir=/e2e/out/s7-backup --timeout="$CEILING" | sed 's/^/    /'
  ms="$(wait_cond s7-nvme True/Reconciled "$CEILING" "$t0")"
  metric "s7 pillarctl repair export-spec -> ExportReconciled=True" "$ms"
  vm_sh storage '[[ -L "/sys/kernel/config/nvmet/subsystems/$1/allowed_hosts/$2" ]]' "$nqn" "$(vm_hostnqn consumer-a)" ||
    fail "the repaired export does not admit consumer-a"
  r="$(vm_exec consumer-a --timeout 150 bash "$GH" sum "$(data_path s7-nvme)" 4)" || fail "read after the repair"
  metric "s7 repair -> consumer read completed (host reconnect)" "$((($(gh consumer-a now) - t0) / 1000))"
  same "nvme data on consumer-a after the repair" "$w" "$r"
  r="$(sum storage "$(backing s7-nvme)" 4)"
  same "backend image after the repair" "$w" "$r"
  detach s7-nvme consumer-a
  delete s7-nvme
}

# 8. In-band authentication (issue 11). iSCSI CHAP: an initiator with the
#    right IQN but the wrong password is refused, the right one logs in and
#    reads back what it wrote; the key is kept by the agent in a 0600 file
#    and in no log. NVMe-oF DH-HMAC-CHAP (bidirectional, on nvme modules
#    built with in-band auth): a wrong host key is refused by the target, a
#    wrong controller key by the host, the right pair connects and reads
#    back what it wrote. NFS: root_squash by default (volume root 0777, or
#    nfsRootOwner/nfsRootMode),
#    no_root_squash only with nfsRootSquash=false.
S8_PASSWORD=s8-Chap-Secret-4711
s8_create() { # VOL PROTO KIND POOL PARAMS_JSON SECRETS_JSON
  local vol="$1" cap req resp
  cap="$(cap_json "$3")"
  req="$(jq -cn --arg n "$vol" --arg p "$2" --arg pool "$4" --argjson cap "$cap" \
    --arg ip "$STORAGE_IP" --argjson extra "$5" --argjson secrets "$6" \
    '{name:$n, capacityRange:{requiredBytes:"67108864"}, volumeCapabilities:[$cap],
      parameters:({agent:"storage-1", pool:$pool, protocol:$p, bindAddress:$ip} + $extra),
      secrets:$secrets}')"
  resp="$(ctl CreateVolume "$req")" || fail "CreateVolume $vol"
  V_CAP[$vol]="$cap"
  V_CTX[$vol]="$(jq -c '.volume.volumeContext' <<<"$resp")"
  step "created $vol: $(jq -c . <<<"${V_CTX[$vol]}")"
}
s8_publish() { # VOL GUEST: ControllerPublish only; prints the response
  ctl ControllerPublishVolume "$(jq -cn --arg v "$1" --arg n "$2" --argjson cap "${V_CAP[$1]}" \
    --argjson vc "${V_CTX[$1]}" '{volumeId:$v, nodeId:$n, volumeCapability:$cap, volumeContext:$vc}')"
}
s8_stage() { # VOL GUEST SECRETS_JSON
  node_csi "$2" NodeStageVolume "$(jq -cn --arg v "$1" --arg s "$(staging "$1")" \
    --argjson cap "${V_CAP[$1]}" --argjson vc "${V_CTX[$1]}" --argjson pc "${P_CTX[$1:$2]}" \
    --argjson secrets "$3" \
    '{volumeId:$v, publishContext:$pc, stagingTargetPath:$s, volumeCapability:$cap,
      volumeContext:$vc, secrets:$secrets}')"
}
# s8_secret_nowhere WHAT SECRET: no log, store or stage record holds it.
s8_secret_nowhere() {
  if vm_exec storage grep -rlF "$2" /e2e/out /var/lib/pillar-csi/controller >/dev/null; then
    fail "$1 is in a log or in the store"
  fi
  if vm_exec consumer-a grep -rlF "$2" /e2e/out /var/lib/pillar-csi/node >/dev/null; then
    fail "$1 is in the node plugin's log or state"
  fi
  step "no log, store or stage record holds $1"
}
# Every nvme and iscsiadm the node plugin runs on consumer-a goes through a
# wrapper that logs its argv to /e2e/out (which s8_secret_nowhere searches):
# a secret on a command line, where any local user reads it in
# /proc/PID/cmdline, would be found there.
s8_log_argv() { # on | off
  if [[ "$1" == on ]]; then
    local wrapper
    # shellcheck disable=SC2016 # expanded by the wrapper, in the guest
    wrapper='#!/bin/sh
printf "%s\n" "${0##*/} $*" >>/e2e/out/consumer-a-argv.log
exec "/usr/sbin/${0##*/}" "$@"
'
    vm_sh consumer-a 'for t in nvme iscsiadm; do
        printf "%s" "$1" >"/usr/local/sbin/$t" && chmod 0755 "/usr/local/sbin/$t" || exit 1
      done' "$wrapper" || fail "installing the argv loggers on consumer-a"
  else
    vm_sh consumer-a 'rm -f /usr/local/sbin/nvme /usr/local/sbin/iscsiadm' || true
  fi
}
# s8_private PATH...: each configfs attribute on the storage guest is mode
# 0600 and a local user other than root cannot read it.
s8_private() {
  local f mode
  for f in "$@"; do
    mode="$(vm_exec storage stat -c '%a' "$f")" || fail "stat $f"
    [[ "$mode" == 600 ]] || fail "$f is mode $mode, not 600"
    if vm_exec storage setpriv --reuid=65534 --regid=65534 --clear-groups cat "$f" >/dev/null 2>&1; then
      fail "user 65534 read $f"
    fi
  done
}
s8() {
  local good bad resp w r out out2
  good="$(jq -cn --arg p "$S8_PASSWORD" '{chapUsername:"consumer", chapPassword:$p}')"
  bad='{"chapUsername":"consumer","chapPassword":"not-the-password"}'
  s8_log_argv on

  # iSCSI CHAP.
  s8_create s8-chap iscsi block demo '{"auth":"chap"}' "$good"
  [[ "$(vctx s8-chap auth)" == chap ]] || fail "volume context lacks auth=chap"
  resp="$(s8_publish s8-chap consumer-a)" || fail "ControllerPublishVolume s8-chap"
  P_CTX[s8-chap:consumer-a]="$(jq -c '.publishContext' <<<"$resp")"
  local tpg
  tpg="/sys/kernel/config/target/iscsi/$(vctx s8-chap targetID)/tpgt_1"
  [[ "$(vm_exec storage cat "$tpg/attrib/authentication")" == 1 ]] || fail "LIO authentication is not 1"
  step "LIO enforces CHAP (authentication=1) on the target"
  s8_private "$tpg/acls/$(vm_iqn consumer-a)/auth/password"
  step "LIO: the ACL's CHAP password is mode 0600, unreadable by another local user"
  if out="$(s8_stage s8-chap consumer-a "$bad" 2>&1)"; then
    fail "NodeStage with the wrong CHAP password succeeded"
  fi
  out2="$(vm_sh consumer-a 'iscsiadm -m session 2>/dev/null || true')"
  [[ "$out2" != *"$(vctx s8-chap targetID)"* ]] || fail "a session exists after the wrong password"
  step "right IQN, wrong password: refused ($(tr '\n' ' ' <<<"$out" | cut -c1-160))"
  if out="$(s8_stage s8-chap consumer-a '{}' 2>&1)"; then fail "NodeStage without secrets succeeded"; fi
  [[ "$out" == *secrets.chapUsername* ]] || fail "NodeStage without secrets: $out"
  step "no secrets: refused naming secrets.chapUsername"
  s8_stage s8-chap consumer-a "$good" >/dev/null || fail "NodeStage with the right CHAP password"
  node_publish s8-chap consumer-a
  w="$(fill consumer-a "$(target s8-chap)" 4)"
  r="$(sum storage "$(backing s8-chap)" 4)"
  same "CHAP session data" "$w" "$r"
  out="$(vm_exec storage stat -c '%a' "/var/lib/pillar-csi/agent/credentials/demo:2fs8-chap.json")"
  [[ "$out" == 600 ]] || fail "agent credentials file mode $out"
  step "agent keeps the credentials in a 0600 file"
  s8_secret_nowhere "the CHAP password" "$S8_PASSWORD"
  detach s8-chap consumer-a
  delete s8-chap

  # NVMe-oF DH-HMAC-CHAP, bidirectional: the guests' nvme modules are built
  # with in-band authentication (tests/e2e/nvme-auth-modules.sh).
  local key ctrl_key wrong nqn secrets sub
  key="$(vm_exec consumer-a nvme gen-dhchap-key -n "$(vm_hostnqn consumer-a)")" ||
    fail "nvme gen-dhchap-key"
  [[ "$key" == DHHC-1:00:*: ]] || fail "unexpected key format from nvme gen-dhchap-key: ${key:0:10}"
  ctrl_key="$(vm_exec consumer-a nvme gen-dhchap-key -n "$(vm_hostnqn consumer-a)")" ||
    fail "nvme gen-dhchap-key (controller key)"
  wrong="$(vm_exec consumer-a nvme gen-dhchap-key -n "$(vm_hostnqn consumer-a)")" ||
    fail "nvme gen-dhchap-key (a wrong key)"
  step "nvme gen-dhchap-key: host ${key:0:10}..., controller ${ctrl_key:0:10}... (DHHC-1:00:<base64>:)"
  secrets="$(jq -cn --arg k "$key" --arg c "$ctrl_key" '{dhchapKey:$k, dhchapCtrlKey:$c}')"
  s8_create s8-dhchap nvmeof-tcp block demo '{"auth":"chap"}' "$secrets"
  resp="$(s8_publish s8-dhchap consumer-a)" || fail "ControllerPublishVolume s8-dhchap"
  P_CTX[s8-dhchap:consumer-a]="$(jq -c '.publishContext' <<<"$resp")"
  nqn="$(vctx s8-dhchap targetID)"
  local host_dir
  host_dir="/sys/kernel/config/nvmet/hosts/$(vm_hostnqn consumer-a)"
  [[ "$(vm_exec storage cat "$host_dir/dhchap_key")" == "$key" ]] || fail "nvmet host dhchap_key is not the volume's key"
  [[ "$(vm_exec storage cat "$host_dir/dhchap_ctrl_key")" == "$ctrl_key" ]] ||
    fail "nvmet host dhchap_ctrl_key is not the volume's controller key"
  vm_sh storage '[[ -L "/sys/kernel/config/nvmet/subsystems/$1/allowed_hosts/$2" ]]' "$nqn" "$(vm_hostnqn consumer-a)" ||
    fail "consumer-a is not in allowed_hosts"
  step "nvmet: consumer-a admitted with its dhchap_key and dhchap_ctrl_key"
  s8_private "$host_dir/dhchap_key" "$host_dir/dhchap_ctrl_key"
  step "nvmet: both keys are mode 0600, unreadable by another local user"
  # Connected controllers of the subsystem on consumer-a (0 after a refusal).
  sub='n=0; for f in /sys/class/nvme/nvme*/subsysnqn; do [[ -e "$f" && "$(cat "$f")" == "$1" ]] && n=$((n + 1)); done; echo $n'
  if out="$(s8_stage s8-dhchap consumer-a "$(jq -cn --arg k "$wrong" --arg c "$ctrl_key" '{dhchapKey:$k, dhchapCtrlKey:$c}')" 2>&1)"; then
    fail "NodeStage with the right NQN but the wrong host key succeeded"
  fi
  [[ "$(vm_sh consumer-a "$sub" "$nqn")" == 0 ]] || fail "a controller is connected after the wrong host key"
  step "right NQN, wrong host key: refused by the target ($(tr '\n' ' ' <<<"$out" | cut -c1-160))"
  if out="$(s8_stage s8-dhchap consumer-a "$(jq -cn --arg k "$key" --arg c "$wrong" '{dhchapKey:$k, dhchapCtrlKey:$c}')" 2>&1)"; then
    fail "NodeStage with the wrong controller key succeeded (the host did not check the target)"
  fi
  [[ "$(vm_sh consumer-a "$sub" "$nqn")" == 0 ]] || fail "a controller is connected after the wrong controller key"
  step "right host key, wrong controller key: the host refuses the target"
  if out="$(s8_stage s8-dhchap consumer-a '{}' 2>&1)"; then fail "NodeStage without secrets succeeded"; fi
  [[ "$out" == *secrets.dhchapKey* ]] || fail "NodeStage without secrets: $out"
  step "no secrets: refused naming secrets.dhchapKey"
  s8_stage s8-dhchap consumer-a "$secrets" >/dev/null || fail "NodeStage with the right keys"
  [[ "$(vm_sh consumer-a "$sub" "$nqn")" == 1 ]] || fail "no controller connected with the right keys"
  node_publish s8-dhchap consumer-a
  w="$(fill consumer-a "$(target s8-dhchap)" 4)"
  r="$(sum storage "$(backing s8-dhchap)" 4)"
  same "DH-HMAC-CHAP session data" "$w" "$r"
  detach s8-dhchap consumer-a
  delete s8-dhchap
  s8_secret_nowhere "the DH-HMAC-CHAP key" "${key:10:24}"
  s8_secret_nowhere "the CHAP password" "$S8_PASSWORD"
  out="$(vm_exec consumer-a cat /e2e/out/consumer-a-argv.log)" || fail "no argv log on consumer-a"
  [[ "$out" == *"iscsiadm -m discovery"* && "$out" == *"nvme disconnect"* ]] ||
    fail "the argv log did not see the node plugin's commands: $out"
  step "the node plugin's nvme and iscsiadm command lines (logged) hold neither secret"
  s8_log_argv off

  # NFS root squashing.
  create s8-nfs nfs nfs demo
  create s8-nfs-open nfs nfs demo '"nfsRootSquash":"false"'
  s8_publish s8-nfs consumer-a >/dev/null || fail "ControllerPublish s8-nfs"
  s8_publish s8-nfs-open consumer-a >/dev/null || fail "ControllerPublish s8-nfs-open"
  out="$(exports_of)"
  local squash open_opts
  squash="$(awk -v p="$(vctx s8-nfs targetID)" '$1 == p { getline; print } ' <<<"$out")$(grep -F "$(vctx s8-nfs targetID)" <<<"$out" || true)"
  open_opts="$(awk -v p="$(vctx s8-nfs-open targetID)" '$1 == p { getline; print } ' <<<"$out")$(grep -F "$(vctx s8-nfs-open targetID)" <<<"$out" || true)"
  [[ "$squash" == *"$A_IP("*",root_squash"* ]] || fail "default export is not root_squash: $squash"
  [[ "$open_opts" == *no_root_squash* ]] || fail "opted-out export is not no_root_squash: $open_opts"
  step "exportfs -v: default root_squash, nfsRootSquash=false no_root_squash"
  ctl_unpublish s8-nfs consumer-a || fail "unpublish s8-nfs"
  ctl_unpublish s8-nfs-open consumer-a || fail "unpublish s8-nfs-open"
  delete s8-nfs-open

  # The volume root under root_squash: the default 0777 lets a squashed root
  # write (as nobody); nfsRootOwner/nfsRootMode give it to one uid only.
  attach s8-nfs consumer-a
  local mnt
  mnt="$(target s8-nfs)"
  out="$(vm_exec consumer-a stat -c '%a %u:%g' "$mnt")"
  [[ "$out" == "777 0:0" ]] || fail "default NFS volume root is $out, not 777 0:0"
  vm_sh consumer-a 'echo ok >"$1/by-root"' "$mnt" || fail "root (squashed) cannot write to a default volume"
  out="$(vm_exec consumer-a stat -c '%u' "$mnt/by-root")"
  [[ "$out" == 65534 ]] || fail "a file written by root is owned by $out, not the squashed 65534"
  step "default root 0777: root writes, squashed to 65534"
  [[ "$(vm_exec storage stat -c '%a' "$POOL_DIR")" == 700 ]] || fail "the file pool directory is not 0700"
  if vm_exec storage setpriv --reuid=65534 --regid=65534 --clear-groups \
    touch "$POOL_DIR/s8-nfs/by-a-local-user" 2>/dev/null; then
    fail "a local user of the storage node wrote into a 0777 NFS volume"
  fi
  step "the pool directory is 0700: no local user of the storage node reaches the 0777 volume"
  detach s8-nfs consumer-a
  delete s8-nfs
  create s8-nfs-own nfs nfs demo '"nfsRootOwner":"1000:1000","nfsRootMode":"0770"'
  attach s8-nfs-own consumer-a
  mnt="$(target s8-nfs-own)"
  out="$(vm_exec consumer-a stat -c '%a %u:%g' "$mnt")"
  [[ "$out" == "770 1000:1000" ]] || fail "nfsRootOwner/Mode volume root is $out, not 770 1000:1000"
  vm_sh consumer-a 'setpriv --reuid=1000 --regid=1000 --clear-groups sh -c "echo ok >\"\$1/by-1000\"" sh "$1"' "$mnt" ||
    fail "uid 1000 cannot write to its volume"
  # (Squashed root may not even look inside the 0770 directory: stat as 1000.)
  out="$(vm_exec consumer-a setpriv --reuid=1000 --regid=1000 --clear-groups stat -c '%u:%g' "$mnt/by-1000")" ||
    fail "uid 1000 cannot stat its own file"
  [[ "$out" == 1000:* ]] || fail "uid 1000's file is owned by $out"
  out="$(vm_exec storage stat -c '%u:%g' "$POOL_DIR/s8-nfs-own/by-1000")"
  [[ "$out" == 1000:* ]] || fail "uid 1000's file is owned by $out on the server"
  if vm_sh consumer-a 'echo x >"$1/by-root"' "$mnt" 2>/dev/null; then
    fail "squashed root wrote to a 0770 volume of uid 1000"
  fi
  step "nfsRootOwner 1000:1000 nfsRootMode 0770: uid 1000 writes, squashed root is refused"
  detach s8-nfs-own consumer-a
  delete s8-nfs-own
}

# 9. NFS subtree escape (issue 22, item 6). File-pool volumes are directories
#    of one file system; knfsd's handle names an inode of that file system.
#    consumer-a (root on its own host) is allowed on s9-a only and forges a
#    handle for s9-b's file (inode and generation read on the storage node):
#    pillar's export of s9-a (subtree_check) refuses it, with the parent's
#    pair swapped too. The same forgery against a plain no_subtree_check
#    export of a scratch directory of the same file system reads the file,
#    so the attack itself is shown to work in this run.
S9_SCRATCH=/var/lib/pillar-e2e/s9-scratch
S9_MNT=/mnt/s9-scratch
s9_cleanup() {
  vm_sh consumer-a 'umount -f "$1" 2>/dev/null; rmdir "$1" 2>/dev/null; true' "$S9_MNT"
  vm_sh storage 'exportfs -u "$2:$1" 2>/dev/null; rm -rf "$1"; true' "$S9_SCRATCH" "$A_IP"
}
# s9_pair GUEST-PATH: "<inode>:<generation>" of a file on the storage node
# (the generation through FS_IOC_GETVERSION, as lsattr -v prints it).
s9_pair() {
  vm_sh storage 'echo "$(stat -c %i "$1"):$(lsattr -vd "$1" | awk "{print \$1}")"' "$1"
}
# s9_forge PATH SUBST...: runs the forgery on consumer-a; prints
# "rc=<exit> out=<what it read>" (stderr, the handles, to the log).
s9_forge() {
  local out rc=0
  out="$(vm_exec consumer-a "$FH_FORGE" "$@" 2>"$E2E_RUN/s9-forge.err")" || rc=$?
  sed 's/^/    /' "$E2E_RUN/s9-forge.err" >&2
  echo "rc=$rc out=$out"
}
s9() {
  trap s9_cleanup EXIT
  local secret mnt a_dir b_dir own victim a_pair b_pair adir_pair bdir_pair got line
  secret="s9-volume-b-secret-$RANDOM$RANDOM"
  create s9-a nfs nfs demo
  create s9-b nfs nfs demo
  a_dir="$(vctx s9-a targetID)" b_dir="$(vctx s9-b targetID)"
  # Volume B's data: written by its tenant (here on the server), readable by anyone who can reach it.
  vm_sh storage 'printf "%s" "$2" >"$1/secret" && chmod 0644 "$1/secret"' "$b_dir" "$secret"
  attach s9-a consumer-a
  mnt="$(target s9-a)"
  vm_sh consumer-a 'echo mine >"$1/own"' "$mnt" || fail "consumer-a cannot write its own volume"
  own="$(s9_pair "$a_dir/own")" victim="$(s9_pair "$b_dir/secret")"
  adir_pair="$(s9_pair "$a_dir")" bdir_pair="$(s9_pair "$b_dir")"
  step "inode:generation on storage: own $own, victim $victim (dirs $adir_pair, $bdir_pair)"

  got="$(s9_forge "$mnt/own" "$own=$victim")"
  [[ "$got" != rc=2* ]] || fail "the handle could not be forged (helper error): see the log above"
  [[ "$got" != *"$secret"* ]] || fail "a forged handle read volume B's file through volume A's export: $got"
  [[ "$got" == rc=3* ]] || fail "forgery through s9-a: want a refusal (rc=3), got $got"
  step "forged handle (victim inode+generation) via s9-a: refused"
  got="$(s9_forge "$mnt/own" "$own=$victim" "$adir_pair=$bdir_pair")"
  [[ "$got" != rc=2* ]] || fail "the handle has no parent pair to swap: is s9-a exported with subtree_check?"
  [[ "$got" != *"$secret"* ]] || fail "a forged handle (parent swapped too) read volume B's file"
  [[ "$got" == rc=3* ]] || fail "forgery (parent swapped) through s9-a: want a refusal (rc=3), got $got"
  step "forged handle (victim and its parent directory) via s9-a: refused"
  wait_cond s9-a True/Reconciled "$CEILING" >/dev/null || fail "s9-a export not reconciled (drift?)"
  line="$(exports_of | grep -A1 -F "$a_dir" | tr -d '\n')"
  [[ "$line" == *"$A_IP("* && "$line" != *no_subtree_check* ]] ||
    fail "s9-a is not exported with subtree checking: $line"
  step "s9-a exported to consumer-a with subtree checking (no no_subtree_check in exportfs -v), Reconciled"

  # Control: the same forgery against a plain no_subtree_check export of a
  # scratch directory on the same file system.
  local scratch_own
  vm_sh storage 'mkdir -p "$1" && chmod 0777 "$1" && echo mine >"$1/own" &&
    exportfs -o rw,sync,no_subtree_check,root_squash,fsid=5c9a7c3e-0000-4000-8000-000000000009 "$2:$1"' \
    "$S9_SCRATCH" "$A_IP" || fail "scratch export"
  vm_sh consumer-a 'mkdir -p "$1" && mount -t nfs -o vers=4.2,actimeo=0 "$2:$3" "$1"' \
    "$S9_MNT" "$STORAGE_IP" "$S9_SCRATCH" || fail "mounting the scratch export"
  scratch_own="$(s9_pair "$S9_SCRATCH/own")"
  got="$(s9_forge "$S9_MNT/own" "$scratch_own=$victim")"
  [[ "$got" == "rc=0 out=$secret" ]] ||
    fail "control: the forgery did not read volume B through a no_subtree_check export ($got): the attack is not shown to work"
  step "control: the same forgery via a no_subtree_check export of $S9_SCRATCH read volume B's file"
  s9_cleanup

  detach s9-a consumer-a
  delete s9-a
  delete s9-b
}

# 10. Thick LVM zeroing (issue 22, item 7). A thick LV's extents may have
#     held a deleted volume's data: a new volume reads zeros over all of it,
#     and so do the extents an expand adds (the tenant's data stays). The
#     extents are checked to be the same ones (lvs seg_pe_ranges), so the
#     test cannot pass by an allocation that happened to be fresh.
s10_create() { # VOL BYTES: raw block over iSCSI on the thick LVM pool
  local vol="$1" cap req resp
  cap="$(cap_json block)"
  req="$(jq -cn --arg n "$vol" --arg b "$2" --arg pool "$VG" --argjson cap "$cap" --arg ip "$STORAGE_IP" \
    '{name:$n, capacityRange:{requiredBytes:$b}, volumeCapabilities:[$cap],
      parameters:{agent:"storage-1", pool:$pool, protocol:"iscsi", bindAddress:$ip}}')"
  resp="$(ctl CreateVolume "$req")" || fail "CreateVolume $vol"
  V_CAP[$vol]="$cap"
  V_CTX[$vol]="$(jq -c '.volume.volumeContext' <<<"$resp")"
}
s10_pe() { vm_exec storage lvs --noheadings -o seg_pe_ranges "$VG/$1" | tr -d ' \n'; }
s10() {
  local mib=64 bytes=$((64 << 20)) pe_a pe_b pe_d n t0 ms
  # (a) create, fill every byte of the LV, delete; a new volume gets the same extents.
  s10_create s10-a "$bytes"
  pe_a="$(s10_pe s10-a)"
  fill storage "$(backing s10-a)" "$mib" >/dev/null || fail "filling s10-a"
  n="$(gh storage nonzero "$(backing s10-a)" 0 "$mib")"
  ((n > bytes / 2)) || fail "the pattern did not reach s10-a ($n non-zero bytes)"
  delete s10-a
  step "s10-a ($pe_a) filled with random data ($n non-zero bytes), deleted"
  t0=$(now_us)
  s10_create s10-b "$bytes"
  metric "s10 CreateVolume of a 64 MiB thick LV (zeroed)" "$((($(now_us) - t0) / 1000))"
  pe_b="$(s10_pe s10-b)"
  [[ "$pe_b" == "$pe_a" ]] || fail "s10-b got other extents ($pe_b, not $pe_a): the check would prove nothing"
  attach s10-b consumer-a
  n="$(gh consumer-a nonzero "$(target s10-b)" 0 "$mib")" || fail "reading s10-b on consumer-a"
  # Old data is noted and the run goes on, so both halves are shown.
  local -a leaks=()
  if [[ "$n" == 0 ]]; then
    step "s10-b reuses $pe_b; consumer-a reads all $mib MiB over iSCSI: zero"
  else
    leaks+=("the new tenant reads $n non-zero bytes of the deleted s10-a on s10-b ($pe_b)")
    step "LEAK: ${leaks[-1]}"
  fi
  detach s10-b consumer-a
  delete s10-b

  # (b) expand: s10-c holds its tenant's data; s10-d, right after it, is
  # filled and deleted; growing s10-c takes s10-d's extents.
  local w r
  s10_create s10-c "$bytes"
  s10_create s10-d "$bytes"
  pe_d="$(s10_pe s10-d)"
  w="$(fill storage "$(backing s10-c)" "$mib")" || fail "filling s10-c"
  fill storage "$(backing s10-d)" "$mib" >/dev/null || fail "filling s10-d"
  delete s10-d
  step "s10-c filled (its tenant's data); s10-d ($pe_d) filled and deleted"
  t0=$(now_us)
  ctl ControllerExpandVolume "$(jq -cn --arg b "$((2 * bytes))" '{volumeId:"s10-c", capacityRange:{requiredBytes:$b}}')" \
    >/dev/null || fail "ControllerExpandVolume s10-c"
  metric "s10 ControllerExpandVolume +64 MiB (zeroed)" "$((($(now_us) - t0) / 1000))"
  local pe_c
  pe_c="$(s10_pe s10-c)"
  [[ "$pe_c" == *"${pe_d#*:}"* || "$pe_c" == *"-${pe_d##*-}" ]] ||
    fail "s10-c grew into other extents ($pe_c, s10-d had $pe_d): the check would prove nothing"
  r="$(sum storage "$(backing s10-c)" "$mib")"
  same "s10-c's first 64 MiB after the expand (its tenant's data)" "$w" "$r"
  n="$(gh storage nonzero "$(backing s10-c)" "$mib" "$mib")"
  if [[ "$n" == 0 ]]; then
    step "s10-c grew into s10-d's extents ($pe_c): the added 64 MiB read zero, the first 64 MiB unchanged"
  else
    leaks+=("the expanded s10-c ($pe_c) exposes $n non-zero bytes of the deleted s10-d in its new extents")
    step "LEAK: ${leaks[-1]}"
  fi
  delete s10-c
  ((${#leaks[@]} == 0)) || fail "old data handed out: ${leaks[*]}"

  # Zeroing speed: a 512 MiB volume (the data disk is 1 GiB). The guest's
  # virtio disk offers write-zeroes (a qcow2 metadata update): for the
  # device-bound cost, the same 512 MiB written as zeros (dd, O_DIRECT).
  t0=$(now_us)
  s10_create s10-big $((512 << 20))
  ms=$((($(now_us) - t0) / 1000))
  metric "s10 CreateVolume of a 512 MiB thick LV (zeroed)" "$ms"
  t0=$(gh storage now)
  vm_exec storage blkdiscard --zeroout --force "$(backing s10-big)" || fail "blkdiscard --zeroout"
  metric "s10 blkdiscard --zeroout of 512 MiB (write-zeroes offload)" "$((($(gh storage now) - t0) / 1000))"
  t0=$(gh storage now)
  vm_exec storage dd if=/dev/zero of="$(backing s10-big)" bs=1M count=512 oflag=direct status=none ||
    fail "dd of zeros"
  metric "s10 512 MiB of zeros written (dd O_DIRECT, no offload)" "$((($(gh storage now) - t0) / 1000))"
  delete s10-big
}

# ------------------------------------------------------------------ recovery timing (issue 28)

# A consumer's I/O across a fault: io-probe (tests/tools/io_probe.cc) writes
# 1 MiB O_DIRECT + fsync (or, for NFS, reads) every 100 ms until told to stop,
# then verifies the bytes and prints "ios=.. errors=.. max_gap_ms=..
# gap_end_us=.. verified=..". The gap and the repair time are figures, never
# timed assertions.
probe_start() { # GUEST write|read PATH: prints the background request id
  vm_exec "$1" rm -f /run/io-probe.stop
  vm_exec_bg "$1" "$IO_PROBE" "$2" "$3" /run/io-probe.stop
}
probe_stop() { # GUEST ID: prints the probe's line
  vm_exec "$1" touch /run/io-probe.stop
  vm_bg_wait "$1" "$2" "$CEILING"
}
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }
dmesg_mark() { vm_exec "$1" sh -c 'dmesg | wc -l'; }
# The kernel's I/O errors (block layer, ext4, xfs, NFS) logged since MARK.
dmesg_io_errors() { # GUEST MARK
  vm_exec "$1" sh -c "dmesg | tail -n +$(($2 + 1)) | grep -E 'I/O error|EXT4-fs (error|warning)|read-only|XFS .*(error|shutdown)|blk_update_request' || true"
}
# probe_check GUEST OUT MARK WHAT: identical bytes, no kernel I/O error.
probe_check() {
  local err
  [[ "$(field "$2" verified)" == ok ]] || fail "$4: the bytes read back differ from those written ($2)"
  err="$(dmesg_io_errors "$1" "$3")"
  [[ -z "$err" ]] || fail "$4: kernel I/O errors on $1: $err"
  step "$4: bytes identical, no kernel I/O error"
}
writable() { # GUEST VOL
  vm_exec "$1" sh -c 'echo ok >"$1/after-fault" && sync && [ "$(findmnt -no OPTIONS "$2" | cut -d, -f1)" = rw ]' \
    sh "$(target "$2")" "$(staging "$2")" || fail "$2: the filesystem is not writable after the fault"
  step "$2: filesystem writable after the fault"
}
# nvmet_rebuilt NQN HOSTNQN: the nvmet export is back (port link, namespace, ACL).
nvmet_rebuilt_cmd='[[ -L "/sys/kernel/config/nvmet/subsystems/$1/allowed_hosts/$2" ]] &&
  ls /sys/kernel/config/nvmet/ports/*/subsystems/ | grep -qxF "$1" &&
  [[ "$(cat "/sys/kernel/config/nvmet/subsystems/$1/namespaces/1/enable")" == 1 ]]'

# 11. NVMe/TCP, ext4: nvmet unloaded on the storage node under a writer;
#     once with nvme-cli's own reconnect delay (10 s, the stall of issue 28)
#     and once with pillar's default (1 s).
s11_run() { # VOL LABEL
  local vol="$1" label="$2" nqn ctrl t0 ms id out mark gap
  attach "$vol" consumer-a
  nqn="$(vctx "$vol" targetID)"
  ctrl="$(vm_exec consumer-a sh -c 'for c in /sys/class/nvme/nvme*; do [ "$(cat $c/subsysnqn)" = "$1" ] && echo $c; done' sh "$nqn" | head -1)"
  step "$vol: $ctrl reconnect_delay=$(vm_exec consumer-a sh -c "cat $ctrl/reconnect_delay || echo n/a") ctrl_loss_tmo=$(vm_exec consumer-a sh -c "cat $ctrl/ctrl_loss_tmo || echo n/a")"
  mark="$(dmesg_mark consumer-a)"
  id="$(probe_start consumer-a write "$(data_path "$vol")")"
  e2e__sleep 2
  t0=$(gh storage now)
  gh storage nvmet-unload
  ms="$(wait_until "$t0" "$CEILING" bash -c "$nvmet_rebuilt_cmd" bash "$nqn" "$(vm_hostnqn consumer-a)")" ||
    fail "nvmet export of $nqn not rebuilt"
  metric "s11 $label: nvmet unload -> export rebuilt (repair)" "$ms"
  # Until the writer has resumed (a 10 s reconnect delay), then 2 s more.
  wait_until_resumed consumer-a
  e2e__sleep 2
  out="$(probe_stop consumer-a "$id")" || fail "io-probe: $out"
  step "$vol probe: $out"
  [[ "$(field "$out" errors)" == 0 ]] || fail "$vol: the writer saw I/O errors ($out)"
  probe_check consumer-a "$out" "$mark" "$vol"
  writable consumer-a "$vol"
  gap="$(field "$out" max_gap_ms)"
  metric "s11 $label: longest gap between the writer's I/Os (stall)" "$gap"
  step "figure: s11 $label: stall - repair = $((gap - ms)) ms (guest clocks)"
  detach "$vol" consumer-a
  delete "$vol"
}
# Waits until every NVMe controller of GUEST is live again (or gives up after
# CEILING; the probe's own figures tell the rest).
wait_until_resumed() { # GUEST
  local i
  for ((i = 0; i < CEILING * 2; i++)); do
    vm_exec "$1" sh -c 'f=$(ls -t /sys/class/nvme/*/state 2>/dev/null); for s in $f; do [ "$(cat $s)" = live ] || exit 1; done' && return 0
    e2e__sleep 0.5
  done
}
s11() {
  create s11-nvme-old nvmeof-tcp fs "$POOL_BLOCK" '"nvmeReconnectDelay":"10"'
  [[ "$(vctx s11-nvme-old nvmeReconnectDelay)" == 10 ]] || fail "volume context lacks nvmeReconnectDelay 10: ${V_CTX[s11-nvme-old]}"
  s11_run s11-nvme-old "reconnect delay 10 s (nvme-cli default)"
  create s11-nvme nvmeof-tcp fs "$POOL_BLOCK"
  [[ "$(vctx s11-nvme nvmeReconnectDelay)" == 1 && "$(vctx s11-nvme nvmeCtrlLossTimeout)" == 600 ]] ||
    fail "volume context lacks pillar's default timing: ${V_CTX[s11-nvme]}"
  s11_run s11-nvme "reconnect delay 1 s (pillar default)"
  # A parameter of the other protocol is refused, naming it.
  local out
  if out="$(ctl CreateVolume "$(jq -cn --argjson cap "$(cap_json fs)" '{name:"s11-bad", capacityRange:{requiredBytes:"67108864"}, volumeCapabilities:[$cap], parameters:{agent:"storage-1", pool:"demo", protocol:"nvmeof-tcp", iscsiReplacementTimeout:"600"}}')" 2>&1)"; then
    fail "CreateVolume took iscsiReplacementTimeout on an nvmeof-tcp volume"
  fi
  [[ "$out" == *iscsiReplacementTimeout* ]] || fail "the refusal does not name the parameter: $out"
  step "iscsiReplacementTimeout on nvmeof-tcp refused: ${out:0:160}"
}

# 12. iSCSI, ext4 on LVM: the agent stopped, LIO wiped, the agent started
#     again, under a writer. The repair is bounded by the agent's restart.
s12() {
  create s12-iscsi iscsi fs "$POOL_LV"
  attach s12-iscsi consumer-a
  local iqn t0 ts ms id out mark gap sess
  iqn="$(vctx s12-iscsi targetID)"
  sess="$(vm_exec consumer-a sh -c 'for s in /sys/class/iscsi_session/session*; do [ "$(cat $s/targetname)" = "$1" ] && echo $s; done' sh "$iqn" | head -1)"
  step "session $sess: recovery_tmo=$(vm_exec consumer-a sh -c "cat $sess/recovery_tmo || echo n/a") ping_tmo/recv_tmo=$(vm_exec consumer-a sh -c "cat $sess/device/connection*/iscsi_connection/*/ping_tmo $sess/device/connection*/iscsi_connection/*/recv_tmo 2>/dev/null | tr '\n' /")"
  mark="$(dmesg_mark consumer-a)"
  id="$(probe_start consumer-a write "$(data_path s12-iscsi)")"
  e2e__sleep 2
  t0=$(gh storage now)
  stop_agent
  metric "s12 agent stop (SIGTERM -> exit)" "$((($(gh storage now) - t0) / 1000))"
  gh storage lio-clear
  ts=$(gh storage now)
  start_agent
  metric "s12 agent start -> serving (ready file)" "$((($(gh storage now) - ts) / 1000))"
  ms="$(wait_until "$t0" "$CEILING" bash -c '[[ "$(cat /sys/kernel/config/target/iscsi/$1/tpgt_1/enable 2>/dev/null)" == 1 &&
    -d /sys/kernel/config/target/iscsi/$1/tpgt_1/acls/$2 && -d /sys/kernel/config/target/iscsi/$1/tpgt_1/lun/lun_0 ]]' bash "$iqn" "$(vm_iqn consumer-a)")" ||
    fail "LIO export of $iqn not rebuilt"
  metric "s12 agent stop, LIO wiped -> export rebuilt (repair)" "$ms"
  metric "s12 agent start -> export rebuilt" "$((ms - (ts - t0) / 1000))"
  e2e__sleep 4
  out="$(probe_stop consumer-a "$id")" || fail "io-probe: $out"
  step "probe: $out"
  [[ "$(field "$out" errors)" == 0 ]] || fail "the writer saw I/O errors ($out)"
  probe_check consumer-a "$out" "$mark" s12-iscsi
  writable consumer-a s12-iscsi
  gap="$(field "$out" max_gap_ms)"
  metric "s12 longest gap between the writer's I/Os (stall)" "$gap"
  step "figure: s12 stall - repair = $((gap - ms)) ms (guest clocks)"
  detach s12-iscsi consumer-a
  delete s12-iscsi
}

# 13. NFS: the export table wiped (exportfs -ua) three times with the agent
#     up, under a reader; first with the table unwatched (--nfs-etab in a
#     directory that does not exist: the resync repairs), then watched (the
#     agent repairs on the event).
s13_wipes() { # LABEL
  local path path2 i t0 ms id out mark worst=0
  path="$(vctx s13-nfs targetID)"
  path2="$(vctx s13-nfs2 targetID)"
  mark="$(dmesg_mark consumer-a)"
  id="$(probe_start consumer-a read "$(data_path s13-nfs)")"
  e2e__sleep 1
  for i in 1 2 3; do
    t0=$(gh storage now)
    vm_exec storage exportfs -ua
    ms="$(wait_until "$t0" "$CEILING" bash "$GH" nfs-has "$path" "$A_IP")" || fail "export of $path not rebuilt"
    metric "s13 $1: exportfs -ua #$i -> export back (repair)" "$ms"
    # The second volume comes back in the same repair (one batch: exportfs -a).
    wait_until "$t0" "$CEILING" bash "$GH" nfs-has "$path2" "$A_IP" >/dev/null || fail "export of $path2 not rebuilt"
    ((ms > worst)) && worst=$ms
    e2e__sleep 2
  done
  out="$(probe_stop consumer-a "$id")" || fail "io-probe: $out"
  step "probe: $out"
  probe_check consumer-a "$out" "$mark" "s13 $1"
  metric "s13 $1: longest gap between the reader's successful reads" "$(field "$out" max_gap_ms)"
  step "figure: s13 $1: failed reads $(field "$out" errors) (first: $(field "$out" first_error)), worst repair $worst ms"
}
s13() {
  create s13-nfs nfs nfs "$POOL_NFS" '"nfsRootSquash":"false"'
  create s13-nfs2 nfs nfs "$POOL_NFS"
  attach s13-nfs consumer-a
  attach s13-nfs2 consumer-a
  fill consumer-a "$(data_path s13-nfs)" 1 >/dev/null
  stop_agent
  start_agent --nfs-etab=/run/pillar-no-etab-watch/etab # a directory that does not exist: unwatched
  s13_wipes "unwatched (resync only)"
  stop_agent
  start_agent
  s13_wipes "watched (agent repairs on the event)"
  # The watched repairs re-applied both volumes in one batch: one
  # `exportfs -a` for the two (issue 26), not an `exportfs -o` per client.
  vm_sh storage 'grep -q "\"msg\":\"exports repaired on a kernel event\".*\"volumes\":2" /e2e/out/agent.log' ||
    fail "no repair of both volumes at once in the agent's log"
  writable consumer-a s13-nfs
  writable consumer-a s13-nfs2
  detach s13-nfs consumer-a
  detach s13-nfs2 consumer-a
  delete s13-nfs
  delete s13-nfs2
}

# 14. The storage guest reboots under consumer I/O: vm_restart storage (the
#     kernel's target state, loop devices, active LVs, knfsd and every
#     process are gone; the disks stay, with the controller's store, the
#     agent's state and its exports.d files) while consumer-a writes
#     (O_DIRECT + fsync) to an NVMe/TCP ext4 volume (file pool) and an iSCSI
#     ext4 volume (LVM) and reads an NFS volume. The node then comes back as
#     its init system would bring it up (storage_boot), then the agent and
#     the controller with their usual flags. nvmet and LIO come back from the
#     store through the controller (the agent's new boot epoch -> re-apply);
#     NFS from knfsd's own start (exportfs -r of the agent's exports.d file).
#     Asserts identical bytes, writable file systems, no kernel I/O error on
#     consumer-a, no failed I/O and each probe's I/O resumed; prints the
#     reboot, the agent's start, each export's return and each probe's
#     longest gap as figures (benchmark figures, not timed assertions).

# The storage node's init after a reboot: what setup_storage did once that a
# reboot undoes, and nothing of pillar's exports. The file pool directory
# and the VG's metadata are on the disks. `modprobe loop` stands for
# systemd's static /dev/loop-control node (which loads the module on first
# use); the VG is activated as lvm2's boot-time autoactivation does (on a
# real disk, as here: the data disk is a virtio disk, not a loop device);
# knfsd starts like nfs-server.service, whose `exportfs -r` re-reads
# /etc/exports.d. The target modules are left to the agent (it loads them).
storage_boot() { # prints "loop=MS vg=MS zfs=MS knfsd=MS" (guest clock)
  vm_sh storage '
    set -e
    ms() { echo $(((${EPOCHREALTIME/./} - $1) / 1000)); }
    t=${EPOCHREALTIME/./}
    mkdir -p /run/pillar
    modprobe loop
    loop=$(ms "$t") t=${EPOCHREALTIME/./}
    for disk in /dev/disk/by-id/virtio-pillar-data{1,2,3}; do
      for _ in $(seq 600); do [[ -e $disk ]] && break; sleep 0.1; done
    done
    vgchange -q -a y "$1" >/dev/null
    if [[ -n $2 ]]; then vgchange -q -a y "$2" >/dev/null; fi
    vg=$(ms "$t") t=${EPOCHREALTIME/./}
    # zfs-import-scan.service: the pool has no cache file.
    if [[ -n $3 ]]; then
      modprobe zfs zfs_arc_max=67108864
      zpool import -d /dev/disk/by-id -o cachefile=none "$3"
    fi
    zfs=$(ms "$t") t=${EPOCHREALTIME/./}
    pillar-nfs-server start >/dev/null
    echo "loop=$loop vg=$vg zfs=$zfs knfsd=$(ms "$t")"' "$VG" \
    "$(selected lvm-thin && echo "$THIN_VG")" "$(selected zfs && echo "$ZPOOL")"
}

# clock_offset GUEST: the guest's wall clock minus the host's, in µs (best of
# three round trips, the guest's reading against the host's midpoint: good
# to a few tens of ms). A rebooted guest sets its clock again from the
# emulated RTC, to the second, so times across a reboot go through the host.
clock_offset() {
  local i h1 g h2 rt best=-1 off=0
  for i in 1 2 3; do
    h1=$(e2e__now)
    g=$(gh "$1" now)
    h2=$(e2e__now)
    rt=$((h2 - h1))
    if ((best < 0 || rt < best)); then
      best=$rt
      off=$((g - (h1 + h2) / 2))
    fi
  done
  echo "$off"
}

# log_us FILE SKIP STRING...: the "ts" (guest µs) of the first line after line
# SKIP of a daemon's JSON log that contains every STRING.
log_us() {
  local f="$1" skip="$2" lines p ts
  shift 2
  lines="$(tail -n +"$((skip + 1))" "$f" 2>/dev/null)"
  for p in "$@"; do lines="$(grep -F -- "$p" <<<"$lines")" || return 1; done
  ts="$(head -n 1 <<<"$lines" | jq -r .ts)" && [[ "$ts" == 20* ]] || return 1
  date -u -d "$ts" +%s%6N
}
# wait_log FILE SKIP STRING...: waits (ceiling CEILING) for such a line.
wait_log() {
  local deadline=$(($(e2e__now) + CEILING * 1000000))
  while (($(e2e__now) < deadline)); do
    log_us "$@" && return 0
    e2e__sleep 0.2
  done
  return 1
}

# Runs in the storage guest from its boot on: the moment (guest clock, µs)
# each export is back in the kernel. nvmet: allowed_hosts link, namespace
# enabled, port link; LIO: TPG enabled with the ACL and LUN 0; NFS: knfsd
# running with the consumer's rule. Polls every 100 ms with builtins only (a
# fork costs ~50 ms of the guest's single CPU, which is repairing at the
# same time); -1 for an export not back within $8 seconds.
# shellcheck disable=SC2016 # expanded in the guest
S14_WATCH='
  nqn=$1 hnqn=$2 iqn=$3 ini=$4 path=$5 client=$6 gh=$7
  end=$((${EPOCHREALTIME/./} + $8 * 1000000))
  n=/sys/kernel/config/nvmet t=/sys/kernel/config/target/iscsi/$iqn/tpgt_1
  nvme=-1 iscsi=-1 nfs=-1 e=""
  mkfifo /run/s14-watch.fifo 2>/dev/null
  exec 3<>/run/s14-watch.fifo
  while ((nvme < 0 || iscsi < 0 || nfs < 0)) && ((${EPOCHREALTIME/./} < end)); do
    now=${EPOCHREALTIME/./}
    if ((nvme < 0)) && [[ -L $n/subsystems/$nqn/allowed_hosts/$hnqn ]]; then
      e=""
      { read -r e <"$n/subsystems/$nqn/namespaces/1/enable"; } 2>/dev/null
      if [[ $e == 1 ]]; then
        for p in "$n"/ports/*/subsystems/"$nqn"; do [[ -L $p ]] && nvme=$now; done
      fi
    fi
    if ((iscsi < 0)) && [[ -d $t/acls/$ini && -d $t/lun/lun_0 ]]; then
      e=""
      { read -r e <"$t/enable"; } 2>/dev/null
      [[ $e == 1 ]] && iscsi=$now
    fi
    if ((nfs < 0)) && [[ -r /proc/fs/nfsd/threads ]]; then
      e=0
      { read -r e </proc/fs/nfsd/threads; } 2>/dev/null
      ((e > 0)) && bash "$gh" nfs-has "$path" "$client" && nfs=$now
    fi
    read -r -t 0.1 -u 3 _
  done
  echo "nvme=$nvme iscsi=$iscsi nfs=$nfs"'

# s14_resumed GUEST ID AFTER_US OFF_US DEADLINE_US: waits for the probe's
# "resumed" notice (a success ending a gap of more than 1 s) at a moment
# after AFTER_US (host clock; OFF_US is the guest's clock offset); prints that
# moment (host µs).
s14_resumed() {
  local f at
  f="$(vm_dir "$1")/share/ctl/$2/stderr"
  while (($(e2e__now) < $5)); do
    at="$(sed -n 's/^io-probe: resumed after a gap of [0-9]* ms at \([0-9]*\) us$/\1/p' "$f" 2>/dev/null | tail -n 1)"
    if [[ -n "$at" ]] && ((at - $4 > $3)); then
      echo $((at - $4))
      return 0
    fi
    e2e__sleep 0.2
  done
  return 1
}

# On every exit of s14: the probes told to stop, and the storage node serving
# again (booted, initialised, agent and controller running), so the cleanup
# of a failed run and the later scenarios find it as the setup left it.
s14_recover() {
  local -
  set +e
  vm_exec consumer-a touch /run/io-probe.stop >/dev/null 2>&1
  if ! vm_running storage; then
    vm_restart storage || return 0
  fi
  if ! gh storage running pillar-agent; then
    storage_boot
    start_agent
  fi
  gh storage running pillar-controller || start_controller
  return 0
}

# s14_kernel_log GUEST MARK T0_US OFF_US: the guest's kernel messages since
# MARK, each at its time since T0 (host clock), for the record: how the
# initiators lost and found the target.
s14_kernel_log() {
  local line ts us
  vm_exec "$1" dmesg --time-format iso | tail -n +"$(($2 + 1))" | grep -vE 'EXT4-fs \(.*\): mounted' | tail -n 60 |
    while IFS= read -r line; do
      ts="${line%% *}"
      us="$(date -u -d "${ts/,/.}" +%s%6N 2>/dev/null)" || us=""
      if [[ -n "$us" ]]; then
        printf '    %+8d ms  %s\n' "$(((us - $4 - $3) / 1000))" "${line#* }"
      else
        printf '    %s\n' "$line"
      fi
    done
}

s14() {
  trap s14_recover EXIT
  local fs
  fs="$(vm_exec storage findmnt -no FSTYPE -T "$(dirname "$STORE")")"
  [[ "$fs" != tmpfs && -n "$fs" ]] || fail "the controller's store $STORE is on '$fs', which a reboot loses"
  step "controller store $STORE is on $fs (the root disk, kept by vm_restart)"
  create s14-nvme nvmeof-tcp fs "$POOL_BLOCK"
  create s14-iscsi iscsi fs "$POOL_LV"
  create s14-nfs nfs nfs "$POOL_NFS" '"nfsRootSquash":"false"'
  attach s14-nvme consumer-a
  attach s14-iscsi consumer-a
  attach s14-nfs consumer-a
  local v nqn iqn path ctrl sess known_nvme known_iscsi known_nfs
  nqn="$(vctx s14-nvme targetID)"
  iqn="$(vctx s14-iscsi targetID)"
  path="$(vctx s14-nfs targetID)"
  known_nvme="$(fill consumer-a "$(target s14-nvme)/known" 4)"
  known_iscsi="$(fill consumer-a "$(target s14-iscsi)/known" 4)"
  known_nfs="$(fill consumer-a "$(data_path s14-nfs)" 4)"
  step "4 MiB of known data on each volume"
  ctrl="$(vm_exec consumer-a sh -c 'for c in /sys/class/nvme/nvme*; do [ "$(cat $c/subsysnqn)" = "$1" ] && echo $c; done' sh "$nqn" | head -1)"
  step "nvme $ctrl: reconnect_delay=$(vm_exec consumer-a cat "$ctrl/reconnect_delay") ctrl_loss_tmo=$(vm_exec consumer-a cat "$ctrl/ctrl_loss_tmo")"
  sess="$(vm_exec consumer-a sh -c 'for s in /sys/class/iscsi_session/session*; do [ "$(cat $s/targetname)" = "$1" ] && echo $s; done' sh "$iqn" | head -1)"
  step "iscsi $sess: recovery_tmo=$(vm_exec consumer-a cat "$sess/recovery_tmo")"
  step "nfs mount: $(vm_exec consumer-a findmnt -no OPTIONS "$(staging s14-nfs)")"

  local mark id_nvme id_iscsi id_nfs off_c off_s t0 t_ready ts log_skip wid watch hnqn ini out
  hnqn="$(vm_hostnqn consumer-a)"
  ini="$(vm_iqn consumer-a)"
  # The watcher must see all three exports now, or its silence after the
  # reboot would mean nothing.
  watch="$(vm_sh storage "$S14_WATCH" "$nqn" "$hnqn" "$iqn" "$ini" "$path" "$A_IP" "$GH" 10)"
  [[ "$watch" != *=-1* ]] || fail "the export watcher does not see the exports before the reboot: $watch"
  mark="$(dmesg_mark consumer-a)"
  id_nvme="$(probe_start consumer-a write "$(data_path s14-nvme)")"
  id_iscsi="$(probe_start consumer-a write "$(data_path s14-iscsi)")"
  id_nfs="$(probe_start consumer-a read "$(data_path s14-nfs)")"
  off_c="$(clock_offset consumer-a)"
  log_skip="$(wc -l <"$(vm_dir storage)/share/out/controller.log")"
  e2e__sleep 2

  # The reboot.
  t0=$(e2e__now)
  vm_restart storage || fail "the storage guest did not boot again"
  t_ready=$(e2e__now)
  metric "s14 reboot (vm_restart -> guest ready)" "$(((t_ready - t0) / 1000))"
  wid="$(vm_exec_bg storage bash -c "$S14_WATCH" bash "$nqn" "$hnqn" "$iqn" "$ini" "$path" "$A_IP" "$GH" "$CEILING")"
  ts=$(e2e__now)
  out="$(storage_boot)" || fail "the storage node's init (loop, VG, knfsd) failed"
  metric "s14 node init (loop module, VG activation, knfsd start)" "$((($(e2e__now) - ts) / 1000))"
  step "node init in the guest (ms): $out"
  ts=$(e2e__now)
  start_agent || fail "the agent did not start after the reboot"
  metric "s14 agent start -> serving (ready file)" "$((($(e2e__now) - ts) / 1000))"
  metric "s14 reboot start -> agent serving" "$((($(e2e__now) - t0) / 1000))"
  ts=$(e2e__now)
  start_controller || fail "the controller did not start after the reboot"
  metric "s14 controller start -> serving (ready file)" "$((($(e2e__now) - ts) / 1000))"

  # The exports, back in the kernel (the guest watcher's clock, set against
  # the host's once the repair is over).
  watch="$(vm_bg_wait storage "$wid" $((CEILING + 30)))" || fail "the export watcher failed: $watch"
  off_s="$(clock_offset storage)"
  local p w
  declare -A back=()
  for p in nvme iscsi nfs; do
    w="$(field "$watch" "$p")"
    [[ -n "$w" && "$w" != -1 ]] || fail "the $p export did not come back within ${CEILING} s of the boot ($watch)"
    back[$p]=$(((w - off_s - t0) / 1000))
    metric "s14 $p: reboot start -> export back (repair)" "${back[$p]}"
  done
  # The controller's part: the agent's new epoch noticed, nvmet and LIO
  # re-applied from the store (its log lines, on the guest's new clock).
  local clog us
  clog="$(vm_dir storage)/share/out/controller.log"
  us="$(wait_log "$clog" "$log_skip" "agent boot epoch changed")" ||
    fail "the controller did not log the agent's new boot epoch"
  metric "s14 reboot start -> controller saw the agent's new boot epoch" "$(((us - off_s - t0) / 1000))"
  for v in s14-nvme s14-iscsi; do
    us="$(wait_log "$clog" "$log_skip" '"msg":"export repaired"' "\"volume\":\"$v\"")" ||
      fail "the controller did not re-apply $v's export"
    metric "s14 ${v#s14-}: reboot start -> controller re-applied the export" "$(((us - off_s - t0) / 1000))"
  done
  if us="$(log_us "$clog" "$log_skip" '"msg":"export repaired"' '"volume":"s14-nfs"')"; then
    step "s14-nfs: the controller re-applied the export too, at +$(((us - off_s - t0) / 1000)) ms"
  else
    step "s14-nfs: knfsd's start restored the export (exportfs -r of the agent's exports.d file); the controller found nothing to change"
  fi

  # The consumer's I/O: each probe resumed after the guest was back.
  local deadline at label gap err
  local -A probe=([nvme]=$id_nvme [iscsi]=$id_iscsi [nfs]=$id_nfs) resumed=() res=()
  deadline=$(($(e2e__now) + CEILING * 1000000))
  for p in nvme iscsi nfs; do
    if at="$(s14_resumed consumer-a "${probe[$p]}" "$t_ready" "$off_c" "$deadline")"; then
      resumed[$p]=$(((at - t0) / 1000))
      step "$p probe resumed at +${resumed[$p]} ms"
    else
      resumed[$p]=-1
      step "$p probe: no I/O completed after the guest's boot within ${CEILING} s"
    fi
  done
  e2e__sleep 3
  for p in nvme iscsi nfs; do
    res[$p]="$(probe_stop consumer-a "${probe[$p]}")" || fail "the $p probe did not stop: ${res[$p]}"
    step "$p probe: ${res[$p]}"
  done
  local bad=()
  for p in nvme iscsi nfs; do
    label=writer
    [[ $p == nfs ]] && label=reader
    gap="$(field "${res[$p]}" max_gap_ms)"
    err="$(field "${res[$p]}" errors)"
    metric "s14 $p: longest gap between the $label's I/Os (stall)" "$gap"
    step "figure: s14 $p: failed I/Os $err (first: $(field "${res[$p]}" first_error)), $(field "${res[$p]}" ios) I/Os, resumed at +${resumed[$p]} ms = export back + $((resumed[$p] - back[$p])) ms"
    [[ "$err" == 0 ]] || bad+=("the $p $label saw $err failed I/Os ($(field "${res[$p]}" first_error))")
    ((resumed[$p] >= 0)) || bad+=("the $p $label's I/O did not resume")
  done
  ((${#bad[@]} == 0)) || fail "${bad[*]}"
  step "consumer-a's kernel log since the probes started (ms since the reboot's start):"
  s14_kernel_log consumer-a "$mark" "$t0" "$off_c" || true
  for p in nvme iscsi nfs; do probe_check consumer-a "${res[$p]}" "$mark" "s14-$p"; done
  step "LVs after the init: $(vm_exec storage lvs --noheadings -o lv_name,lv_attr "$VG" | tr -s ' \n' ' ')"
  # The condition stays True through the reboot (the controller went down
  # with it and found the exports repaired in the pass that noticed them).
  for v in s14-nvme s14-iscsi s14-nfs; do
    wait_cond "$v" True/Reconciled "$CEILING" >/dev/null
    step "$v: ExportReconciled=True/Reconciled"
  done

  same "nvme known data after the reboot" "$known_nvme" "$(sum consumer-a "$(target s14-nvme)/known" 4)"
  same "iscsi known data after the reboot" "$known_iscsi" "$(sum consumer-a "$(target s14-iscsi)/known" 4)"
  same "nfs data after the reboot" "$known_nfs" "$(sum consumer-a "$(data_path s14-nfs)" 4)"
  same "nfs data after the reboot vs server file" "$known_nfs" "$(sum storage "$path/payload" 4)"
  for v in s14-nvme s14-iscsi s14-nfs; do writable consumer-a "$v"; done

  detach s14-nvme consumer-a
  detach s14-iscsi consumer-a
  detach s14-nfs consumer-a
  delete s14-nvme
  delete s14-iscsi
  delete s14-nfs
}

# 15. The backend's own view of sizes, on the pool itself: CreateVolume's and
#     ControllerExpandVolume's capacity is what the pool made (blockdev of the
#     LV or zvol, the image file, the dataset's refquota), an odd size is
#     rounded up, never down; GetCapacity is what the pool has (zfs get
#     available, the thin pool's size less its data_percent, the VG's free
#     space, the file system's); DeleteVolume leaves nothing of the volume.
#     On ZFS, a local user of the storage node cannot write into a 0777
#     dataset (the pool's mountpoint is kept private, as the file pool's is).

# backend_bytes VOL: the volume's size as the storage guest's own tools say.
backend_bytes() {
  local id
  id="$(vctx "$1" agentVolumeID)"
  case "$id" in
    "$ZFS_DS"/*) vm_sh storage 'zfs get -Hp -o value volsize,refquota "$1" | grep -v "^-$"' "$id" ;;
    demo/*) vm_exec storage stat -c %s "$(backing "$1")" ;;
    *) vm_exec storage blockdev --getsize64 "$(backing "$1")" ;;
  esac
}
# pool_free POOL: the bytes the pool has left, as its own tools say.
pool_free() {
  case "$1" in
    "$ZFS_DS") vm_exec storage zfs get -Hp -o value available "$1" ;;
    "$THIN_VG") vm_sh storage 'lvs --noheadings --units b --nosuffix -o lv_size,data_percent "$1" |
        awk "{ printf \"%d\n\", \$1 - \$1 * \$2 / 100 }"' "$THIN_VG/$THIN_POOL" ;;
    "$VG") vm_exec storage vgs --noheadings --units b --nosuffix -o vg_free "$1" | tr -d ' ' ;;
    demo) vm_sh storage 'echo $(($(stat -f -c "%a * %S" "$1")))' "$POOL_DIR" ;;
  esac
}
s15_expand() { # VOL BYTES: prints the capacity ControllerExpandVolume answers
  ctl ControllerExpandVolume "$(jq -cn --arg v "$1" --arg b "$2" '{volumeId:$v, capacityRange:{requiredBytes:$b}}')" |
    jq -r '.capacityBytes'
}
s15() {
  local vol pool got want free cap odd=$((96 * 1048576 + 1))
  for vol in s15-blk s15-nfs; do
    if [[ $vol == s15-blk && $POOL_BLOCK == "$ZFS_DS" ]]; then
      # The storage class's ZFS properties reach zfs create by their names.
      pool=$POOL_BLOCK
      create "$vol" iscsi block "$pool" '"backend.thin":"true","backend.volblocksize":"8K","backend.compression":"lz4"'
      got="$(vm_exec storage zfs get -Hp -o value refreservation,volblocksize,compression,volmode "$ZFS_DS/$vol" | tr '\n' ' ')"
      [[ "$got" == "0 8192 lz4 dev " ]] ||
        fail "$vol: refreservation, volblocksize, compression, volmode are '$got', not '0 8192 lz4 dev'"
      step "$vol: thin (no refreservation), volblocksize 8K, lz4, volmode=dev"
    elif [[ $vol == s15-blk ]]; then
      pool=$POOL_BLOCK
      create "$vol" iscsi block "$pool"
    else
      pool=$POOL_NFS
      [[ $pool == demo ]] && continue # the file pool records no size for a directory
      create "$vol" nfs nfs "$pool"
    fi
    got="$(backend_bytes "$vol")" || fail "$vol: the backend's size"
    [[ "$got" == "${V_BYTES[$vol]}" && "$got" -ge 67108864 ]] ||
      fail "$vol: CreateVolume says ${V_BYTES[$vol]} bytes, the pool has $got (asked 67108864)"
    step "$vol: created with $got bytes, as the pool says"
    want="$(s15_expand "$vol" "$odd")" || fail "ControllerExpandVolume $vol"
    got="$(backend_bytes "$vol")" || fail "$vol: the backend's size"
    [[ "$got" == "$want" && "$got" -ge "$odd" ]] ||
      fail "$vol: ControllerExpandVolume to $odd says $want bytes, the pool has $got"
    step "$vol: expanded to $got bytes (asked $odd), as the pool says"
  done
  if [[ -n "${V_BYTES[s15-nfs]:-}" ]]; then
    # The dataset's root is 0777 (nfsRootMode's default): no local user of the
    # storage node may reach it through the pool's mountpoint.
    if vm_exec storage setpriv --reuid=65534 --regid=65534 --clear-groups \
      touch "$(vctx s15-nfs targetID)/by-a-local-user" 2>/dev/null; then
      fail "a local user of the storage node wrote into the 0777 dataset s15-nfs"
    fi
    step "a local user of the storage node cannot reach the 0777 dataset"
  fi
  cap="$(ctl GetCapacity "$(jq -cn --arg p "$POOL_BLOCK" '{parameters:{agent:"storage-1", pool:$p}}')" |
    jq -r '.availableCapacity')" || fail "GetCapacity $POOL_BLOCK"
  free="$(pool_free "$POOL_BLOCK")" || fail "the free space of $POOL_BLOCK"
  # The pool is idle: allow 1 % (or 1 MiB) for metadata written in between.
  local slack=$((free / 100 > 1048576 ? free / 100 : 1048576))
  ((cap > 0 && cap - free <= slack && free - cap <= slack)) ||
    fail "GetCapacity of $POOL_BLOCK says $cap bytes, the pool has $free free"
  step "GetCapacity of $POOL_BLOCK: $cap bytes, the pool says $free"
  for vol in s15-blk s15-nfs; do
    [[ -n "${V_BYTES[$vol]:-}" ]] || continue
    delete "$vol"
    if backend_bytes "$vol" >/dev/null 2>&1; then fail "$vol: still in the pool after DeleteVolume"; fi
  done
  step "deleted: nothing left in the pool"
}

# ------------------------------------------------------------------ main

# E2E_ONLY must name scenarios that exist: a typo is an error, not "0 passed".
check_only() {
  local id unknown=()
  for id in $ONLY; do
    [[ " $SCENARIOS $BENCHES " == *" $id "* ]] || unknown+=("$id")
  done
  if ((${#unknown[@]})); then
    echo "scenarios.sh: E2E_ONLY names unknown scenario(s): ${unknown[*]} (the ids are: $SCENARIOS)" >&2
    echo "e2e: 0 passed, 1 failed"
    exit 2
  fi
  if [[ -z "${ONLY// /}" ]]; then
    echo "scenarios.sh: E2E_ONLY selects no scenario (the ids are: $SCENARIOS)" >&2
    echo "e2e: 0 passed, 1 failed"
    exit 2
  fi
}

# The closing line is printed even when the run aborts (a build that fails, a
# guest that does not boot): the abort counts as one failure.
SUMMARY_DONE=0
on_exit() {
  local rc=$?
  vm_stop_all
  if [[ $SUMMARY_DONE -eq 0 ]]; then
    echo "scenarios.sh: aborted (exit $rc) before the end of the run" >&2
    echo "e2e: $PASSED passed, $((FAILED + 1)) failed"
    ((rc != 0)) || rc=1
  fi
  exit "$rc"
}

# Scenarios that use consumer-a only; a run of just these boots two guests.
ONE_CONSUMER="s8 s9 s10 s11 s12 s13 s14 s15 b1"
needs_consumer_b() {
  local id
  for id in $ONLY; do
    [[ " $ONE_CONSUMER " == *" ${id%@*} "* ]] || return 0
  done
  return 1
}

main() {
  local t0
  check_only
  trap on_exit EXIT
  command -v jq >/dev/null || apt-get install -y --no-install-recommends jq >/dev/null
  t0=$(e2e__now)
  build_binaries
  local b
  for b in "$AGENT_BIN" "$CONTROLLER_BIN" "$PILLARCTL" "$NODE_BIN" "$CSI_CALL" "$STORE_EDIT" "$FH_FORGE" "$IO_PROBE"; do
    [[ -x "$b" ]] || e2e_die "missing $b (build it: cmake --build $BUILD --target $(basename "$b"))"
  done
  phase_time "build (binaries)" "$t0"

  t0=$(e2e__now)
  vm_init
  trap on_exit EXIT # vm_init set its own (vm_stop_all); on_exit runs it
  phase_time "image (build/reuse)" "$t0"

  t0=$(e2e__now)
  # Data disks: 1 thick LVM, 2 lvm-thin, 3 ZFS (blank qcow2 until used).
  vm_start storage --ip "$STORAGE_IP/24" --disk 1G --disk 1G --disk 1G
  vm_start consumer-a --ip "$A_IP/24"
  if needs_consumer_b; then vm_start consumer-b --ip "$B_IP/24"; fi
  vm_wait_ready storage
  vm_wait_ready consumer-a
  if needs_consumer_b; then vm_wait_ready consumer-b; fi
  phase_time "boot (storage and consumers)" "$t0"

  t0=$(e2e__now)
  local certs
  certs="$(vm_dir storage)/share/certs"
  bash "$E2E_SRC/tests/tools/make-certs.sh" "$certs"
  setup_storage
  setup_consumer consumer-a
  if needs_consumer_b; then setup_consumer consumer-b; fi
  start_agent
  start_controller
  start_node consumer-a
  if needs_consumer_b; then start_node consumer-b; fi
  phase_time "setup (targets, agent, controller, 2 node plugins)" "$t0"

  run_scenarios s1 "create/publish/stage/write/read (nvme ext4, iscsi LVM block, nfs RWX)" s1
  run_scenarios s2 "target state lost: nvmet reload, agent restart with LIO/exports wiped" s2
  run_scenarios s3 "out-of-band ACL deletion repaired by the resync (time measured)" s3
  run_scenarios s5 "missed namespace notification: NodeStage ns-rescan" s5
  run_scenarios s6 "access revoked while mounted: NodeUnpublish completes" s6
  run_scenarios s7 "no exportSpec: untouched, pillarctl repair, data intact" s7
  run_scenarios s8 "in-band auth: iSCSI CHAP, NVMe DH-HMAC-CHAP, NFS root_squash and volume root" s8
  run_scenarios s9 "NFS: a forged file handle cannot reach another volume of the file system" s9
  run_scenarios s10 "thick LVM: a new or expanded volume reads zeros, never old data" s10
  run_scenarios s11 "recovery timing: nvmet unload under a writer (reconnect delay 10 s vs 1 s)" s11
  run_scenarios s12 "recovery timing: LIO wiped, agent restarted, under a writer" s12
  run_scenarios s13 "recovery timing: knfsd exports wiped with the agent up, under a reader" s13
  run_scenarios s14 "recovery timing: storage guest reboot under a writer (nvme, iscsi) and a reader (nfs)" s14
  run_scenarios s15 "backend sizes: create, expand, capacity and delete as the pool sees them" s15
  run_scenarios s16 "snapshots: restore reads the snapshot's data, a clone diverges, deletes reclaim" s16
  run_scenarios b1 "bench: snapshot, restore, clone and detached copies: latency and space" b1
  # Last: it changes a consumer's address (and can leave pillar-node stuck).
  run_scenarios s4 "consumer IP change: NFS rule follows, other unpublish leaves it" s4

  echo
  echo "---- times"
  printf '%s\n' "${SUMMARY[@]}"
  local b_ready=-
  if needs_consumer_b; then b_ready="$(<"$(vm_dir consumer-b)/ready_ms")"; fi
  echo "---- guests: storage $(<"$(vm_dir storage)/ready_ms") ms, consumer-a $(<"$(vm_dir consumer-a)/ready_ms") ms, consumer-b $b_ready ms to ready; logs in $E2E_RUN/vm/*/share/out"
  SUMMARY_DONE=1
  echo "e2e: $PASSED passed, $FAILED failed"
  [[ $FAILED -eq 0 ]]
}

main "$@"
