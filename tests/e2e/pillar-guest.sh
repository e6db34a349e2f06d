#!/bin/bash
# pillar-guest.sh CMD ARGS...: guest-side helpers of tests/e2e/scenarios.sh.
# Runs inside the e2e guests (the project tree is shared read-only at the
# same path), so a scenario step is one vm_exec instead of many: every fork
# costs ~50 ms under TCG.
#
#   daemon NAME LOG CMD...       run CMD (exec) with its pid in /run/NAME.pid
#   stop NAME [TIMEOUT_S]        SIGTERM the daemon, SIGKILL after TIMEOUT_S
#   running NAME                 exit 0 when the daemon is alive
#   wait-file FILE TIMEOUT_S     wait until FILE is non-empty
#   cond VOL                     "True/Reconciled", ... from pillarctl
#   wait-cond VOL WANT TIMEOUT_S [T0_US]
#                                wait until the ExportReconciled condition is
#                                WANT (e.g. True/Reconciled); prints
#                                "ms=<since T0 or start> seen=<states>"
#   hold-cond VOL WANT SECONDS   fail if the condition is ever not WANT
#   nvme-dev NQN [NSID]          /dev/nvmeXnY of that namespace (or exit 1)
#   nvmet-clear                  remove every nvmet configfs object
#   lio-clear                    remove every LIO configfs object
#   nvmet-unload                 nvmet-clear + rmmod nvmet_tcp nvmet, retried
#                                (queue teardown is asynchronous; a resync may
#                                re-create an export in between)
#   sum PATH MIB                 sha256 of the first MIB MiB (O_DIRECT)
#   fill PATH MIB                write MIB MiB of random data (O_DIRECT),
#                                print its sha256
#   nonzero PATH SKIP_MIB MIB    how many bytes of MIB MiB from SKIP_MIB are not
#                                zero (O_DIRECT reads)
#   now                          microseconds since the epoch
#   nfs-clients PATH             the clients knfsd exports PATH to, one a line
#   nfs-has PATH CLIENT          exit 0 when knfsd exports PATH to CLIENT
#   wait-until T0_US TIMEOUT_S CMD...
#                                run CMD every 50 ms until it succeeds; print
#                                the ms since T0_US (exit 1 on timeout)
set -uo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

SRC_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${PILLAR_E2E_BUILD:-$SRC_DIR/build}"
PILLARCTL="$BUILD/src/ctl/pillarctl"
STORE="${PILLAR_E2E_STORE:-/var/lib/pillar-csi/controller/store.db}"
CFG=/sys/kernel/config

now_us() { printf '%s\n' "${EPOCHREALTIME/./}"; }

cmd_daemon() {
  local name="$1" log="$2"
  shift 2
  echo $$ >"/run/$name.pid"
  exec "$@" >>"$log" 2>&1
}

cmd_running() {
  local pid
  pid="$(cat "/run/$1.pid" 2>/dev/null)" || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

cmd_stop() {
  local name="$1" timeout="${2:-15}" pid i
  pid="$(cat "/run/$name.pid" 2>/dev/null)" || return 0
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || { rm -f "/run/$name.pid"; return 0; }
  for ((i = 0; i < timeout * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || { rm -f "/run/$name.pid"; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  rm -f "/run/$name.pid"
}

cmd_wait_file() {
  local f="$1" timeout="$2" i
  for ((i = 0; i < timeout * 10; i++)); do
    [[ -s "$f" ]] && return 0
    sleep 0.1
  done
  echo "wait-file: $f did not appear in ${timeout}s" >&2
  return 1
}

cmd_cond() {
  local out
  out="$("$PILLARCTL" --store="$STORE" describe volume "$1" 2>&1)" || { echo "absent"; return 0; }
  if [[ "$out" =~ ExportReconciled=([A-Za-z]+)\ reason=([A-Za-z]+) ]]; then
    echo "${BASH_REMATCH[1]}/${BASH_REMATCH[2]}"
  else
    echo "none"
  fi
}

cmd_wait_cond() {
  local vol="$1" want="$2" timeout="$3" t0="${4:-}" start c seen="" last=""
  start=$(now_us)
  [[ -n "$t0" ]] || t0=$start
  while :; do
    c="$(cmd_cond "$vol")"
    [[ "$c" != "$last" ]] && seen+="${seen:+,}$c" && last="$c"
    if [[ "$c" == "$want" ]]; then
      echo "ms=$((($(now_us) - t0) / 1000)) seen=$seen"
      return 0
    fi
    if (($(now_us) - start > timeout * 1000000)); then
      echo "ms=-1 seen=$seen"
      echo "wait-cond: $vol is $c, not $want, after ${timeout}s (seen: $seen)" >&2
      return 1
    fi
    sleep 0.2
  done
}

cmd_hold_cond() {
  local vol="$1" want="$2" secs="$3" start c
  start=$(now_us)
  while (($(now_us) - start < secs * 1000000)); do
    c="$(cmd_cond "$vol")"
    if [[ "$c" != "$want" ]]; then
      echo "hold-cond: $vol became $c (wanted $want throughout)" >&2
      return 1
    fi
    sleep 0.5
  done
}

cmd_nvme_dev() {
  local nqn="$1" nsid="${2:-1}" b
  for b in /sys/block/nvme*n*; do
    [[ -e "$b" && "${b##*/}" != nvme*c*n* ]] || continue
    # A multipath head lists its subsystem NQN in device/subsysnqn too.
    if [[ "$(cat "$b/device/subsysnqn" 2>/dev/null || cat "$b/device/../subsysnqn" 2>/dev/null)" == "$nqn" &&
      "$(cat "$b/nsid" 2>/dev/null)" == "$nsid" ]]; then
      echo "/dev/${b##*/}"
      return 0
    fi
  done
  return 1
}

# Everything nvmet has in configfs, in dependency order (what a module reload
# or `nvmetcli clear` leaves: nothing).
cmd_nvmet_clear() {
  local n=$CFG/nvmet p s l ns h
  [[ -d $n ]] || return 0
  for p in "$n"/ports/*/; do
    [[ -d $p ]] || continue
    for l in "$p"subsystems/*; do [[ -L $l ]] && rm -f "$l"; done
    for l in "$p"referrals/*/; do [[ -d $l ]] && rmdir "$l"; done
    rmdir "$p"
  done
  for s in "$n"/subsystems/*/; do
    [[ -d $s ]] || continue
    for l in "$s"allowed_hosts/*; do [[ -L $l ]] && rm -f "$l"; done
    for ns in "$s"namespaces/*/; do
      [[ -d $ns ]] || continue
      echo 0 >"${ns}enable" 2>/dev/null
      rmdir "$ns"
    done
    rmdir "$s"
  done
  for h in "$n"/hosts/*/; do [[ -d $h ]] && rmdir "$h"; done
  return 0
}

cmd_nvmet_unload() {
  local i
  # Up to a minute (normally well under a second): a slow guest is no failure.
  for ((i = 0; i < 600; i++)); do
    cmd_nvmet_clear
    if rmmod nvmet_tcp 2>/dev/null || ! grep -q '^nvmet_tcp ' /proc/modules; then
      rmmod nvmet 2>/dev/null && return 0
    fi
    sleep 0.1
  done
  rmmod nvmet_tcp nvmet
}

cmd_lio_clear() {
  local t=$CFG/target tpg l d w hba so
  [[ -d $t ]] || return 0
  for w in "$t"/iscsi/*/; do
    [[ -d $w && "$w" != */discovery_auth/ ]] || continue
    for tpg in "$w"tpgt_*/; do
      [[ -d $tpg ]] || continue
      echo 0 >"${tpg}enable" 2>/dev/null
      for d in "$tpg"acls/*/; do
        [[ -d $d ]] || continue
        for l in "$d"lun_*/; do
          [[ -d $l ]] || continue
          for x in "$l"*; do [[ -L $x ]] && rm -f "$x"; done
          rmdir "$l"
        done
        rmdir "$d"
      done
      for l in "$tpg"lun/lun_*/; do
        [[ -d $l ]] || continue
        for x in "$l"*; do [[ -L $x ]] && rm -f "$x"; done
        rmdir "$l"
      done
      for d in "$tpg"np/*/; do [[ -d $d ]] && rmdir "$d"; done
      rmdir "$tpg"
    done
    rmdir "$w"
  done
  for hba in "$t"/core/*/; do
    [[ -d $hba && "$hba" != */alua/ ]] || continue
    for so in "$hba"*/; do
      [[ -d $so && -e "${so}enable" ]] || continue
      rmdir "$so"
    done
    rmdir "$hba" 2>/dev/null
  done
  return 0
}

cmd_sum() {
  dd if="$1" bs=1M count="$2" iflag=direct status=none | sha256sum | cut -d' ' -f1
}

cmd_nonzero() {
  local n
  n="$(dd if="$1" bs=1M skip="$2" count="$3" iflag=direct status=none | tr -d '\000' | wc -c)" || return 1
  echo "$n"
}

cmd_fill() {
  local tmp
  tmp="$(mktemp /tmp/fill.XXXXXX)"
  head -c "$(($2 * 1048576))" /dev/urandom >"$tmp"
  if [[ -b "$1" || -c "$1" ]]; then
    dd if="$tmp" of="$1" bs=1M oflag=direct status=none || { rm -f "$tmp"; return 1; }
  else
    dd if="$tmp" of="$1" bs=1M oflag=direct conv=fsync status=none || { rm -f "$tmp"; return 1; }
  fi
  sync
  sha256sum <"$tmp" | cut -d' ' -f1
  rm -f "$tmp"
}

# exportfs -v: "PATH<tab>CLIENT(opts)" or, for a long path, "PATH" and the
# client on the next, indented, line.
cmd_nfs_clients() {
  exportfs -v | awk -v p="$1" '
    /^\// { cur = $1; if (NF >= 2) { c = $2; sub(/\(.*/, "", c); if (cur == p) print c }; next }
    NF >= 1 { c = $1; sub(/\(.*/, "", c); if (cur == p) print c }'
}

cmd_nfs_has() {
  cmd_nfs_clients "$1" | grep -qxF -- "$2"
}

cmd_wait_until() {
  local t0="$1" timeout="$2" start
  shift 2
  start=$(now_us)
  while :; do
    if "$@" >/dev/null 2>&1; then
      echo $((($(now_us) - t0) / 1000))
      return 0
    fi
    if (($(now_us) - start > timeout * 1000000)); then
      echo "wait-until: timed out after ${timeout}s: $*" >&2
      return 1
    fi
    sleep 0.05
  done
}

cmd="${1:-}"
shift || true
case "$cmd" in
  daemon) cmd_daemon "$@" ;;
  stop) cmd_stop "$@" ;;
  running) cmd_running "$@" ;;
  wait-file) cmd_wait_file "$@" ;;
  cond) cmd_cond "$@" ;;
  wait-cond) cmd_wait_cond "$@" ;;
  hold-cond) cmd_hold_cond "$@" ;;
  nvme-dev) cmd_nvme_dev "$@" ;;
  nvmet-clear) cmd_nvmet_clear ;;
  lio-clear) cmd_lio_clear ;;
  nvmet-unload) cmd_nvmet_unload ;;
  sum) cmd_sum "$@" ;;
  fill) cmd_fill "$@" ;;
  nonzero) cmd_nonzero "$@" ;;
  now) now_us ;;
  nfs-clients) cmd_nfs_clients "$@" ;;
  nfs-has) cmd_nfs_has "$@" ;;
  wait-until) cmd_wait_until "$@" ;;
  *) echo "pillar-guest.sh: unknown command '$cmd'" >&2; exit 2 ;;
esac
