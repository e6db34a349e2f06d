#!/usr/bin/env bash
# Smoke test of the real-kernel VM harness and of the kernel targets pillar
# drives: nvmet (NVMe-oF/TCP), LIO (iSCSI) and knfsd (NFSv4), each configured
# by hand (configfs / exportfs) in a "storage" guest and used from a
# "consumer-a" guest over the private guest network.
#
#   tests/e2e/smoke.sh            # exits non-zero if any check fails
#   SMOKE_ONLY="nvme nfs" tests/e2e/smoke.sh   # a subset (an unknown name is an error)
#
# Ends with "smoke: N passed, M failed", also when the run aborts (the abort
# counts as one failure). Waits have ceilings far above the time they take
# (a slow machine is not a failure).
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STORAGE_IP=10.99.0.1
CONSUMER_IP=10.99.0.11
CHECKS="nvme iscsi nfs"
ONLY="${SMOKE_ONLY:-$CHECKS}"
CHECK_T0=0
PASSED=0
FAILED=0
declare -a SUMMARY=()

phase_time() { # NAME START_US
  local ms
  ms=$(e2e__ms_since "$2")
  SUMMARY+=("$(printf '%-22s %6d ms' "$1" "$ms")")
  e2e_log "phase $1: ${ms} ms"
}

# run_check NAME FUNCTION: a check runs in a subshell with errexit, so its
# first failing command fails it; the run goes on with the next check.
run_check() {
  local name="$1" fn="$2" t0 rc=0
  [[ " $ONLY " == *" $name "* ]] || return 0
  t0=$(e2e__now)
  CHECK_T0=$t0
  e2e_log "check $name ..."
  # Asynchronous on purpose: in "( ... ) || rc=$?" bash would ignore errexit.
  (
    set -euo pipefail
    "$fn"
  ) &
  wait $! || rc=$?
  phase_time "check $name" "$t0"
  if [[ $rc -eq 0 ]]; then
    echo "PASS: $name"
    PASSED=$((PASSED + 1))
  else
    echo "FAIL: $name (exit $rc)"
    FAILED=$((FAILED + 1))
  fi
}

# step MESSAGE: progress line with the time since the check started.
step() { echo "  [+$(e2e__ms_since "$CHECK_T0") ms] $*"; }

# A sparse file on a loop device in the storage guest; prints the device.
make_backing() {
  vm_sh storage '
    modprobe loop
    truncate -s 256M "/var/tmp/$1.img"
    losetup --find --show "/var/tmp/$1.img"' "$1"
}

# Write 8 MiB of random data to DEV on the consumer, read it back (O_DIRECT)
# and compare checksums; then compare with the backing device on the storage.
check_data_path() { # DEV BACKING_DEV
  local dev="$1" backing="$2" sum_w sum_r sum_s
  sum_w="$(vm_sh consumer-a '
    head -c 8M /dev/urandom >/tmp/payload
    dd if=/tmp/payload of="$1" bs=1M oflag=direct status=none
    sync
    sha256sum </tmp/payload | cut -d" " -f1' "$dev")"
  sum_r="$(vm_sh consumer-a 'dd if="$1" bs=1M count=8 iflag=direct status=none | sha256sum | cut -d" " -f1' "$dev")"
  sum_s="$(vm_sh storage 'dd if="$1" bs=1M count=8 iflag=direct status=none | sha256sum | cut -d" " -f1' "$backing")"
  echo "  written  $sum_w"
  echo "  read     $sum_r (consumer)"
  echo "  backend  $sum_s (storage)"
  [[ -n "$sum_w" && "$sum_w" == "$sum_r" && "$sum_w" == "$sum_s" ]]
}

# ------------------------------------------------------------------ NVMe-oF/TCP

check_nvme() {
  local nqn=nqn.2024-01.com.bhyoo.pillar-csi:e2e-smoke hostnqn backing dev
  hostnqn="$(vm_hostnqn consumer-a)"
  backing="$(make_backing nvme)"
  vm_sh storage '
    set -e
    nqn=$1 hostnqn=$2 dev=$3 addr=$4
    modprobe -a nvmet nvmet-tcp
    cfg=/sys/kernel/config/nvmet
    sub=$cfg/subsystems/$nqn
    mkdir "$sub"
    echo 0 >"$sub/attr_allow_any_host"
    mkdir "$sub/namespaces/1"
    echo "$dev" >"$sub/namespaces/1/device_path"
    echo 1 >"$sub/namespaces/1/enable"
    mkdir "$cfg/hosts/$hostnqn"
    ln -s "$cfg/hosts/$hostnqn" "$sub/allowed_hosts/$hostnqn"
    mkdir "$cfg/ports/1"
    echo tcp >"$cfg/ports/1/addr_trtype"
    echo ipv4 >"$cfg/ports/1/addr_adrfam"
    echo "$addr" >"$cfg/ports/1/addr_traddr"
    echo 4420 >"$cfg/ports/1/addr_trsvcid"
    ln -s "$sub" "$cfg/ports/1/subsystems/$nqn"' "$nqn" "$hostnqn" "$backing" "$STORAGE_IP"
  step "nvmet subsystem, namespace ($backing), port $STORAGE_IP:4420 configured"

  vm_exec consumer-a modprobe -a nvme-tcp nvme-fabrics
  # A host NQN that is not in allowed_hosts must be refused.
  if vm_exec consumer-a nvme connect -t tcp -a "$STORAGE_IP" -s 4420 -n "$nqn" \
    --hostnqn=nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000dead; then
    echo "  a foreign host NQN was admitted"
    return 1
  fi
  step "foreign host NQN refused"
  vm_exec consumer-a nvme connect -t tcp -a "$STORAGE_IP" -s 4420 -n "$nqn" --hostnqn="$hostnqn"
  # Map the namespace through sysfs (nvmeXnY: Y is not the NSID).
  dev="$(vm_sh consumer-a '
    for _ in $(seq 600); do
      for b in /sys/block/nvme*n*; do
        [[ -e "$b" && "${b##*/}" != nvme*c*n* ]] || continue
        if [[ "$(cat "$b/device/subsysnqn" 2>/dev/null)" == "$1" && "$(cat "$b/nsid")" == 1 ]]; then
          echo "/dev/${b##*/}"; exit 0
        fi
      done
      sleep 0.1
    done
    exit 1' "$nqn")"
  step "connected: namespace 1 of $nqn is $dev on consumer-a"
  check_data_path "$dev" "$backing"
  vm_exec consumer-a nvme disconnect -n "$nqn"
}

# ------------------------------------------------------------------ iSCSI (LIO)

check_iscsi() {
  local iqn=iqn.2003-01.com.bhyoo.pillar-csi:e2e-smoke initiator backing dev
  initiator="$(vm_iqn consumer-a)"
  backing="$(make_backing iscsi)"
  vm_sh storage '
    set -e
    iqn=$1 initiator=$2 dev=$3 addr=$4
    modprobe -a target_core_mod iscsi_target_mod target_core_iblock
    cfg=/sys/kernel/config/target
    so=$cfg/core/iblock_0/smoke
    mkdir -p "$so"
    echo "udev_path=$dev" >"$so/control"
    echo 1 >"$so/enable"
    tpg=$cfg/iscsi/$iqn/tpgt_1
    mkdir -p "$tpg/lun/lun_0"
    ln -s "$so" "$tpg/lun/lun_0/smoke"
    mkdir "$tpg/np/$addr:3260"
    mkdir -p "$tpg/acls/$initiator/lun_0"
    ln -s "$tpg/lun/lun_0" "$tpg/acls/$initiator/lun_0/lun_0"
    echo 0 >"$tpg/attrib/authentication"
    echo 0 >"$tpg/attrib/generate_node_acls"
    echo 1 >"$tpg/enable"' "$iqn" "$initiator" "$backing" "$STORAGE_IP"
  step "LIO target, iblock LUN ($backing), portal, ACL for $initiator configured"

  vm_exec consumer-a modprobe -a iscsi_tcp sd_mod
  # An initiator IQN without an ACL must be refused. (Discovery through an
  # iface rebinds the portal's node records: do this before the real one.)
  vm_sh consumer-a '
    iscsiadm -m iface -I intruder -o new >/dev/null
    iscsiadm -m iface -I intruder -o update -n iface.initiatorname \
      -v iqn.2004-10.org.debian:pillar-e2e:intruder >/dev/null
    iscsiadm -m discovery -t sendtargets -p "$2:3260" -I intruder >/dev/null 2>&1 || true
    if iscsiadm -m node -T "$1" -p "$2:3260" -I intruder --login; then exit 1; fi
    iscsiadm -m node -T "$1" -p "$2:3260" -I intruder -o delete >/dev/null 2>&1 || true
    iscsiadm -m discovery -p "$2:3260" -o delete >/dev/null 2>&1 || true
    iscsiadm -m iface -I intruder -o delete >/dev/null
    exit 0' "$iqn" "$STORAGE_IP" || { echo "  a foreign initiator IQN was admitted"; return 1; }
  step "foreign initiator IQN refused"
  vm_exec consumer-a iscsiadm -m discovery -t sendtargets -p "$STORAGE_IP:3260" -I default | grep -F "$iqn"
  vm_exec consumer-a iscsiadm -m node -T "$iqn" -p "$STORAGE_IP:3260" -I default --login
  dev="$(vm_sh consumer-a '
    for _ in $(seq 600); do
      for s in /sys/class/iscsi_session/session*; do
        [[ "$(cat "$s/targetname" 2>/dev/null)" == "$1" ]] || continue
        for b in "$s"/device/target*/*:*:*:0/block/*; do
          [[ -e "$b" ]] && { echo "/dev/${b##*/}"; exit 0; }
        done
      done
      sleep 0.1
    done
    exit 1' "$iqn")"
  step "logged in: LUN 0 of $iqn is $dev on consumer-a"
  check_data_path "$dev" "$backing"
  vm_exec consumer-a iscsiadm -m node -T "$iqn" -p "$STORAGE_IP:3260" --logout
}

# ------------------------------------------------------------------ NFS (knfsd)

check_nfs() {
  local export=/srv/nfs/smoke sum_c sum_s
  vm_sh storage '
    set -e
    mkdir -p "$1"
    echo "$1 $2(rw,sync,no_subtree_check,no_root_squash)" >/etc/exports.d/smoke.exports
    pillar-nfs-server start
    exportfs -v' "$export" "$CONSUMER_IP"
  step "knfsd started, exported to $CONSUMER_IP"
  vm_exec consumer-a bash -c 'modprobe nfs && mkdir -p /mnt/smoke'
  vm_exec consumer-a --timeout 60 mount -t nfs4 -o vers=4.2,proto=tcp,timeo=50,retrans=2 \
    "$STORAGE_IP:$export" /mnt/smoke
  step "mounted on consumer-a"
  sum_c="$(vm_sh consumer-a '
    head -c 4M /dev/urandom >/mnt/smoke/payload
    sync
    sha256sum </mnt/smoke/payload | cut -d" " -f1')"
  sum_s="$(vm_sh storage 'sha256sum <"$1/payload" | cut -d" " -f1' "$export")"
  echo "  consumer $sum_c"
  echo "  storage  $sum_s"
  [[ -n "$sum_c" && "$sum_c" == "$sum_s" ]]
  vm_exec consumer-a umount /mnt/smoke
  step "data verified, unmounted"
  # From another address the export must be refused.
  vm_set_ip consumer-a eth0 10.99.0.12/24
  if vm_exec consumer-a --timeout 60 timeout 45 mount -t nfs4 -o vers=4.2,proto=tcp,timeo=50,retrans=2 \
    "$STORAGE_IP:$export" /mnt/smoke; then
    echo "  a client outside the export's address list could mount"
    return 1
  fi
  step "client at 10.99.0.12 refused"
  vm_set_ip consumer-a eth0 "$CONSUMER_IP/24"
}

# ------------------------------------------------------------------ main

SUMMARY_DONE=0
on_exit() {
  local rc=$?
  vm_stop_all
  if [[ $SUMMARY_DONE -eq 0 ]]; then
    echo "smoke.sh: aborted (exit $rc) before the end of the run" >&2
    echo "smoke: $PASSED passed, $((FAILED + 1)) failed"
    ((rc != 0)) || rc=1
  fi
  exit "$rc"
}

main() {
  local t0 c unknown=()
  for c in $ONLY; do [[ " $CHECKS " == *" $c "* ]] || unknown+=("$c"); done
  if ((${#unknown[@]})) || [[ -z "${ONLY// /}" ]]; then
    echo "smoke.sh: SMOKE_ONLY=\"$ONLY\" names no check or an unknown one: ${unknown[*]:-} (the checks are: $CHECKS)" >&2
    echo "smoke: 0 passed, 1 failed"
    exit 2
  fi
  trap on_exit EXIT
  t0=$(e2e__now)
  vm_init
  trap on_exit EXIT # vm_init set its own (vm_stop_all); on_exit runs it
  phase_time "image (build/reuse)" "$t0"

  t0=$(e2e__now)
  vm_start storage --ip "$STORAGE_IP/24"
  vm_start consumer-a --ip "$CONSUMER_IP/24"
  vm_wait_ready storage
  vm_wait_ready consumer-a
  phase_time "boot (2 guests)" "$t0"

  local i rtt total=0
  for i in 1 2 3 4 5 6 7 8 9 10; do
    t0=$(e2e__now)
    vm_exec storage true
    rtt=$(e2e__ms_since "$t0")
    total=$((total + rtt))
  done
  SUMMARY+=("$(printf '%-22s %6d ms' "vm_exec true (avg/10)" $((total / 10)))")

  run_check nvme check_nvme
  run_check iscsi check_iscsi
  run_check nfs check_nfs

  echo
  echo "---- times"
  printf '%s\n' "${SUMMARY[@]}"
  echo "---- guests: storage $(<"$(vm_dir storage)/ready_ms") ms, consumer-a $(<"$(vm_dir consumer-a)/ready_ms") ms to ready"
  SUMMARY_DONE=1
  echo "smoke: $PASSED passed, $FAILED failed"
  [[ $FAILED -eq 0 ]]
}

main "$@"
