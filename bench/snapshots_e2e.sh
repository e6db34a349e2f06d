# shellcheck shell=bash
# The snapshot benchmark's body (bench/snapshots.sh runs it): sourced by
# tests/e2e/scenarios.sh, whose guests, pools, agent and controller it uses,
# as its scenario "b1" (b1@zfs, b1@lvm-thin: the same on those pools). Per
# volume size (1 GiB and 10 GiB, thin where the pool can be: the data disks
# are 1 GiB) with BENCH_DATA_MIB of random data written on the storage side:
# CreateSnapshot (dependent and detached), a restore (CreateVolume from the
# snapshot), a clone (CreateVolume from the volume), a detached restore, each
# timed from the CSI call to its answer (through the controller and the
# agent, under software emulation), and how much the pool grew with each
# new snapshot or volume right after its creation. Everything is deleted at the end.
# Only figures: a bench fails only when an operation fails.
# shellcheck disable=SC2154 # the harness's globals (POOL_BLOCK, ZFS_DS, ...)

BENCH_DATA_MIB=${BENCH_DATA_MIB:-128}

# bench_pool_used: the bytes the pool holds now (ZFS: the agent's dataset's
# used; lvm-thin: the thin pool's data_percent of its size; file pool: the
# blocks allocated under its directory). A new copy's cost is the growth.
bench_pool_used() {
  case "$POOL_BLOCK" in
    "$ZFS_DS") vm_exec storage zfs get -Hp -o value used "$ZFS_DS" ;;
    "$THIN_VG")
      vm_sh storage 'lvs --noheadings --units b --nosuffix -o lv_size,data_percent "$1" |
        awk "{ printf \"%d\n\", \$1 * \$2 / 100 }"' "$THIN_VG/$THIN_POOL"
      ;;
    *) vm_sh storage 'du -s -B1 "$1" | cut -f1' "$POOL_DIR" ;;
  esac
}

# bench_copy LABEL WHAT VOL BYTES SOURCE EXTRA: CreateVolume VOL from SOURCE,
# its time and the pool's growth right after it as figures.
bench_copy() {
  local label=$1 what=$2 vol=$3 bytes=$4 src=$5 extra=$6 before t0
  before=$(bench_pool_used)
  t0=$(e2e__now)
  create_from "$vol" nvmeof-tcp block "$POOL_BLOCK" "$bytes" "$src" "$extra"
  metric "$label: $what" "$(e2e__ms_since "$t0")"
  echo "figure: $label: $what right after its creation: the pool grew by $(($(bench_pool_used) - before)) bytes"
}

# bench_time NAME CMD...: runs CMD, its time a figure NAME.
bench_time() {
  local name=$1 t0
  shift
  t0=$(e2e__now)
  "$@" >/dev/null || fail "$name"
  metric "$name" "$(e2e__ms_since "$t0")"
}

b1() {
  local label gib bytes extra v before
  case "$POOL_BLOCK" in
    "$ZFS_DS") label=zfs extra='"backend.thin":"true"' ;;
    "$THIN_VG") label=lvm-thin extra='' ;;
    *) label=file extra='' ;;
  esac
  for gib in 1 10; do
    bytes=$((gib << 30))
    v=b1-$gib
    create_from "$v" nvmeof-tcp block "$POOL_BLOCK" "$bytes" null "$extra"
    vm_exec storage dd if=/dev/urandom of="$(backing "$v")" bs=1M count="$BENCH_DATA_MIB" \
      oflag=direct conv=notrunc,fsync status=none || fail "writing $BENCH_DATA_MIB MiB into $v"
    label="$label $gib GiB ($BENCH_DATA_MIB MiB written)"
    before=$(bench_pool_used)
    bench_time "$label: CreateSnapshot" \
      ctl CreateSnapshot "{\"name\":\"$v-snap\",\"sourceVolumeId\":\"$v\"}"
    echo "figure: $label: CreateSnapshot right after: the pool grew by $(($(bench_pool_used) - before)) bytes"
    before=$(bench_pool_used)
    bench_time "$label: CreateSnapshot detached" \
      ctl CreateSnapshot "{\"name\":\"$v-dsnap\",\"sourceVolumeId\":\"$v\",\"parameters\":{\"detached\":\"true\"}}"
    echo "figure: $label: CreateSnapshot detached right after: the pool grew by $(($(bench_pool_used) - before)) bytes"
    bench_copy "$label" "restore (CreateVolume from the snapshot)" "$v-restore" "$bytes" \
      "{\"snapshot\":{\"snapshotId\":\"$v-snap\"}}" "$extra"
    bench_copy "$label" "clone (CreateVolume from the volume)" "$v-clone" "$bytes" \
      "{\"volume\":{\"volumeId\":\"$v\"}}" "$extra"
    bench_copy "$label" "detached restore (a full copy of the detached snapshot)" "$v-drestore" \
      "$bytes" "{\"snapshot\":{\"snapshotId\":\"$v-dsnap\"}}" "${extra:+$extra,}\"detached\":\"true\""
    bench_time "$label: DeleteSnapshot" ctl DeleteSnapshot "{\"snapshotId\":\"$v-snap\"}"
    bench_time "$label: DeleteSnapshot detached" ctl DeleteSnapshot "{\"snapshotId\":\"$v-dsnap\"}"
    local x
    for x in "$v-drestore" "$v-clone" "$v-restore" "$v"; do delete "$x"; done
    label=${label%% *}
  done
}
