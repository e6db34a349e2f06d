# shellcheck shell=bash
# The snapshot benchmark's body (bench/snapshots.sh runs it): sourced by
# tests/e2e/scenarios.sh, whose guests, pools, agent and controller it uses,
# as its scenario "b1" (b1@zfs, b1@lvm-thin: the same on those pools). Per
# volume size (1 GiB and 10 GiB, thin where the pool can be: the data disks
# are 1 GiB) with BENCH_DATA_MIB of random data written on the storage side:
# CreateSnapshot (dependent and detached), a restore (CreateVolume from the
# snapshot), a clone (CreateVolume from the volume), a detached restore, each
# timed from the CSI call to its answer (through the controller and the
# agent, under software emulation), and the space each new volume takes on
# the pool right after its creation. Everything is deleted at the end.
# Only figures: a bench fails only when an operation fails.
# shellcheck disable=SC2154 # the harness's globals (POOL_BLOCK, ZFS_DS, ...)

BENCH_DATA_MIB=${BENCH_DATA_MIB:-128}

# bench_used VOL: the bytes VOL takes on its pool now (ZFS: used; lvm-thin:
# data_percent of the LV size; file pool: the image's allocated blocks).
bench_used() {
  local id
  id="$(vctx "$1" agentVolumeID)"
  case "$id" in
    "$ZFS_DS"/*) vm_exec storage zfs get -Hp -o value used "$id" ;;
    "$THIN_VG"/*)
      vm_sh storage 'lvs --noheadings --units b --nosuffix -o lv_size,data_percent "$1" |
        awk "{ printf \"%d\n\", \$1 * \$2 / 100 }"' "$id"
      ;;
    *) vm_sh storage 'echo $(( $(stat -c %b "$1") * $(stat -c %B "$1") ))' "$(backing "$1")" ;;
  esac
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
  local pool=$POOL_BLOCK label gib bytes extra v
  case "$pool" in
    "$ZFS_DS") label=zfs extra='"thin":"true"' ;;
    "$THIN_VG") label=lvm-thin extra='' ;;
    *) label=file extra='' ;;
  esac
  for gib in 1 10; do
    bytes=$((gib << 30))
    v=b1-$gib
    create_from "$v" nvmeof-tcp block "$pool" "$bytes" null "$extra"
    vm_exec storage dd if=/dev/urandom of="$(backing "$v")" bs=1M count="$BENCH_DATA_MIB" \
      oflag=direct conv=notrunc,fsync status=none || fail "writing $BENCH_DATA_MIB MiB into $v"
    echo "figure: $label $gib GiB volume with $BENCH_DATA_MIB MiB written: $(bench_used "$v") bytes used"
    bench_time "$label $gib GiB: CreateSnapshot" \
      ctl CreateSnapshot "{\"name\":\"$v-snap\",\"sourceVolumeId\":\"$v\"}"
    bench_time "$label $gib GiB: CreateSnapshot detached" \
      ctl CreateSnapshot "{\"name\":\"$v-dsnap\",\"sourceVolumeId\":\"$v\",\"parameters\":{\"detached\":\"true\"}}"
    local t0
    t0=$(e2e__now)
    create_from "$v-restore" nvmeof-tcp block "$pool" "$bytes" "{\"snapshot\":{\"snapshotId\":\"$v-snap\"}}" "$extra"
    metric "$label $gib GiB: restore (CreateVolume from the snapshot)" "$(e2e__ms_since "$t0")"
    echo "figure: $label $gib GiB restore right after its creation: $(bench_used "$v-restore") bytes used"
    t0=$(e2e__now)
    create_from "$v-clone" nvmeof-tcp block "$pool" "$bytes" "{\"volume\":{\"volumeId\":\"$v\"}}" "$extra"
    metric "$label $gib GiB: clone (CreateVolume from the volume)" "$(e2e__ms_since "$t0")"
    echo "figure: $label $gib GiB clone right after its creation: $(bench_used "$v-clone") bytes used"
    t0=$(e2e__now)
    create_from "$v-drestore" nvmeof-tcp block "$pool" "$bytes" \
      "{\"snapshot\":{\"snapshotId\":\"$v-dsnap\"}}" "${extra:+$extra,}\"detached\":\"true\""
    metric "$label $gib GiB: detached restore (a full copy of the detached snapshot)" "$(e2e__ms_since "$t0")"
    echo "figure: $label $gib GiB detached restore right after its creation: $(bench_used "$v-drestore") bytes used"
    bench_time "$label $gib GiB: DeleteSnapshot" ctl DeleteSnapshot "{\"snapshotId\":\"$v-snap\"}"
    bench_time "$label $gib GiB: DeleteSnapshot detached" ctl DeleteSnapshot "{\"snapshotId\":\"$v-dsnap\"}"
    local x
    for x in "$v-drestore" "$v-clone" "$v-restore" "$v"; do delete "$x"; done
  done
}
