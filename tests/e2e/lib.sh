# shellcheck shell=bash
# Real-kernel VM harness for pillar's e2e tests. Source it from a bash script:
#
#   source tests/e2e/lib.sh
#   vm_start storage --ip 10.99.0.1/24
#   vm_start consumer-a --ip 10.99.0.11/24
#   vm_wait_ready storage; vm_wait_ready consumer-a
#   vm_exec storage modprobe nvmet
#   vm_stop_all            # also runs from the EXIT trap set by vm_start
#
# Guests: Debian 12 root image (build-image.sh) as a throw-away qcow2 overlay,
# the host's linux-image-amd64 kernel, QEMU TCG, -smp 1. Each guest gets:
#   - /e2e           (9p, rw) control spool and /e2e/out for results;
#                     host side: $(vm_dir NAME)/share
#   - $PILLAR_E2E_SRC (9p, read-only) the project tree at the same absolute path
#                     as on the host (default: the repo root)
#   - eth0 on a private L2 segment shared by all guests of the run: each
#     guest's NIC is a UDP socket on 127.0.0.1 to a hub (a device-less QEMU
#     with one hubport per slot). Nothing leaves the machine.
#   - the control channel: requests are directories on the 9p share, announced
#     on a virtio-serial port (a host FIFO pair), run by guest/ctld.
#
# Environment knobs:
#   PILLAR_E2E_CACHE   image cache (default /var/cache/pillar-e2e)
#   PILLAR_E2E_RUN     run directory (default: mktemp -d /tmp/pillar-e2e.XXXXXX)
#   PILLAR_E2E_SRC     project tree shared read-only (default: repo root)
#   PILLAR_E2E_MEM     guest memory in MiB (default 768)
#   PILLAR_E2E_MAX_VMS guests allowed at once (default 3)
#   PILLAR_E2E_CPU     QEMU -cpu model (default qemu64 + x86-64-v2 flags)
#   PILLAR_E2E_KEEP    1: keep disks and request dirs after vm_stop_all
#   PILLAR_E2E_INITRD  "debian": boot /boot/initrd.img + bzImage instead of
#                      the tiny initramfs + vmlinux (PVH) built with the image
#   PILLAR_E2E_SHARES  more read-only host directories for every guest, as
#                      "TAG=DIR ..."; a guest mounts one with
#                      mount -t 9p -o trans=virtio,version=9p2000.L,ro TAG PATH

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

E2E_SRC="${PILLAR_E2E_SRC:-$(cd "$E2E_DIR/../.." && pwd)}"
E2E_MEM="${PILLAR_E2E_MEM:-768}"
E2E_MAX_VMS="${PILLAR_E2E_MAX_VMS:-3}"
E2E_NET_SLOTS=8
E2E_RUN="${PILLAR_E2E_RUN:-}"
E2E_INITED=0
E2E_OWNER_PID=""

# ---------------------------------------------------------------- internals

e2e__now() { printf '%s\n' "${EPOCHREALTIME/./}"; }   # microseconds
e2e__ms_since() { printf '%d\n' $((($(e2e__now) - $1) / 1000)); }

# Sleep without forking: read with a timeout on a FIFO nobody writes to.
e2e__sleep() { read -r -t "$1" -u "$E2E_SLEEP_FD" _ || true; }

e2e__valid_name() { [[ "$1" =~ ^[a-z][a-z0-9-]{0,30}$ ]]; }

vm_dir() { printf '%s/vm/%s\n' "$E2E_RUN" "$1"; }

e2e__pid() {
  local f
  f="$(vm_dir "$1")/pid"
  [[ -s "$f" ]] && cat "$f"
}

vm_running() {
  local pid
  pid="$(e2e__pid "$1" 2>/dev/null)" || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

# One-time setup per run: image, run dir, hub, cleanup trap and watchdog.
vm_init() {
  [[ $E2E_INITED -eq 1 ]] && return 0
  [[ $EUID -eq 0 ]] || e2e_die "the e2e VM harness must run as root"
  command -v qemu-system-x86_64 >/dev/null || bash "$E2E_DIR/deps.sh"
  local kver t0
  t0=$(e2e__now)
  kver="$(e2e_kernel_version)"
  E2E_IMAGE="$(bash "$E2E_DIR/build-image.sh")" || e2e_die "image build failed"
  E2E_INITRD="$(e2e_initrd_path "$E2E_IMAGE")"
  E2E_KERNEL="$(e2e_vmlinux_path "$E2E_IMAGE")"
  [[ -s "$E2E_KERNEL" ]] || E2E_KERNEL="/boot/vmlinuz-$kver"
  if [[ "${PILLAR_E2E_INITRD:-}" == debian ]]; then
    E2E_KERNEL="/boot/vmlinuz-$kver"
    E2E_INITRD="/boot/initrd.img-$kver"
  fi
  E2E_IMAGE_MS=$(e2e__ms_since "$t0")
  if [[ -z "$E2E_RUN" ]]; then
    E2E_RUN="$(mktemp -d /tmp/pillar-e2e.XXXXXX)"
  fi
  mkdir -p "$E2E_RUN/vm" "$E2E_RUN/net"
  [[ -p "$E2E_RUN/sleep.fifo" ]] || mkfifo "$E2E_RUN/sleep.fifo"
  exec {E2E_SLEEP_FD}<>"$E2E_RUN/sleep.fifo"
  E2E_OWNER_PID=$$
  E2E_INITED=1
  trap 'vm_stop_all' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  e2e__start_watchdog
  e2e__start_hub
  e2e_log "run dir $E2E_RUN, image $(basename "$E2E_IMAGE") ready in ${E2E_IMAGE_MS} ms"
}

# Kills every QEMU of this run if the owning shell disappears without running
# its EXIT trap (SIGKILL, a caller that replaced the trap, ...).
e2e__start_watchdog() {
  setsid bash -c '
    owner=$1 run=$2
    exec </dev/null >/dev/null 2>&1
    while kill -0 "$owner" 2>/dev/null && [[ ! -e "$run/stopped" ]]; do sleep 1; done
    [[ -e "$run/stopped" ]] && exit 0
    for f in "$run"/vm/*/pid "$run"/net/hub.pid; do
      [[ -s "$f" ]] && kill -KILL "$(cat "$f")" 2>/dev/null
    done
  ' pillar-e2e-watchdog "$E2E_OWNER_PID" "$E2E_RUN" &
  echo $! >"$E2E_RUN/watchdog.pid"
}

# Loopback UDP ports: slot i uses hub port BASE+2i and guest port BASE+2i+1.
e2e__pick_ports() {
  local base used p ok
  used="$(ss -Hluan 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }')"
  for _ in $(seq 50); do
    base=$((20000 + (RANDOM % 2000) * 16))
    ok=1
    for ((p = base; p < base + 2 * E2E_NET_SLOTS; p++)); do
      grep -qx "$p" <<<"$used" && { ok=0; break; }
    done
    [[ $ok -eq 1 ]] && { printf '%s\n' "$base"; return 0; }
  done
  e2e_die "no free loopback UDP port range"
}

e2e__start_hub() {
  local i args=()
  E2E_NET_BASE="$(e2e__pick_ports)"
  printf '%s\n' "$E2E_NET_BASE" >"$E2E_RUN/net/base"
  for ((i = 0; i < E2E_NET_SLOTS; i++)); do
    args+=(-netdev "socket,id=s$i,udp=127.0.0.1:$((E2E_NET_BASE + 2 * i + 1)),localaddr=127.0.0.1:$((E2E_NET_BASE + 2 * i))"
      -netdev "hubport,id=h$i,hubid=0,netdev=s$i")
  done
  qemu-system-x86_64 -machine none -nodefaults -display none -monitor none -serial none \
    -name pillar-e2e-hub "${args[@]}" </dev/null >"$E2E_RUN/net/hub.log" 2>&1 &
  echo $! >"$E2E_RUN/net/hub.pid"
  e2e__sleep 0.2
  kill -0 "$(<"$E2E_RUN/net/hub.pid")" 2>/dev/null ||
    e2e_die "the network hub (QEMU) did not start: $(cat "$E2E_RUN/net/hub.log")"
}

# Network slot of a guest: stable per name for the whole run (same MAC on restart).
e2e__slot() {
  local name="$1" i f
  for ((i = 0; i < E2E_NET_SLOTS; i++)); do
    f="$E2E_RUN/net/slot.$i"
    [[ -s "$f" && "$(<"$f")" == "$name" ]] && { printf '%s\n' "$i"; return 0; }
  done
  for ((i = 0; i < E2E_NET_SLOTS; i++)); do
    f="$E2E_RUN/net/slot.$i"
    [[ -s "$f" ]] || { printf '%s\n' "$name" >"$f"; printf '%s\n' "$i"; return 0; }
  done
  return 1
}

# ---------------------------------------------------------------- lifecycle

# vm_start NAME [--ip ADDR/LEN] [--mem MiB] [--disk SIZE]... [--disk-image FILE]...
#              [--keep-disk] [--no-net] [--append 'KERNEL ARGS']
# Boots a guest in the background; use vm_wait_ready next. --disk adds a blank
# qcow2 data disk (/dev/vdb, /dev/vdc, ...; serial pillar-dataN); --disk-image
# adds one whose content is the raw image FILE (a copy-on-write overlay: FILE
# is never written). --keep-disk
# boots the disks of a previous vm_start of NAME in this run (a "reboot").
vm_start() {
  local name="$1"
  shift
  e2e__valid_name "$name" || e2e_die "bad VM name '$name' (want [a-z][a-z0-9-]*)"
  vm_init
  local ip="" mem="$E2E_MEM" keep=0 net=1 append="" disks=() saved=("$@")
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --ip) ip="$2"; shift 2 ;;
      --mem) mem="$2"; shift 2 ;;
      --disk) disks+=("$2"); shift 2 ;;
      --disk-image) disks+=("image:$2"); shift 2 ;;
      --keep-disk) keep=1; shift ;;
      --no-net) net=0; shift ;;
      --append) append="$2"; shift 2 ;;
      *) e2e_die "vm_start: unknown option $1" ;;
    esac
  done
  vm_running "$name" && e2e_die "vm_start: $name is already running"
  local running=0 d
  for d in "$E2E_RUN"/vm/*/; do
    [[ -d "$d" ]] && vm_running "$(basename "$d")" && running=$((running + 1))
  done
  [[ $running -lt $E2E_MAX_VMS ]] || e2e_die "vm_start: already $running guests running (PILLAR_E2E_MAX_VMS=$E2E_MAX_VMS)"
  [[ "$E2E_SRC" =~ ^/[A-Za-z0-9._/-]+$ ]] || e2e_die "PILLAR_E2E_SRC must be a plain absolute path: $E2E_SRC"

  local dir slot
  dir="$(vm_dir "$name")"
  mkdir -p "$dir"
  if [[ $keep -eq 0 ]]; then
    rm -rf "$dir/share" "$dir"/disk*.qcow2
    : >"$dir/args"
    [[ ${#saved[@]} -eq 0 ]] || printf '%s\0' "${saved[@]}" >"$dir/args"
  fi
  mkdir -p "$dir/share/ctl" "$dir/share/out"
  rm -f "$dir/share/ready" "$dir/share/ctl"/*/rc 2>/dev/null
  [[ -p "$dir/ctl.in" ]] || mkfifo "$dir/ctl.in"
  [[ -p "$dir/ctl.out" ]] || mkfifo "$dir/ctl.out"
  [[ -e "$dir/disk0.qcow2" ]] || qemu-img create -q -f qcow2 -b "$E2E_IMAGE" -F raw "$dir/disk0.qcow2"

  # mitigations=off: no page-table isolation etc. (a large cost under TCG);
  # cryptomgr.notests: skip the kernel's boot-time crypto self-tests.
  # no_timer_check: on a loaded host the emulated 8254 timer can miss the
  # kernel's IO-APIC check, which then panics ("IO-APIC + timer doesn't work").
  local cmdline="console=ttyS0 panic=-1 quiet net.ifnames=0 mitigations=off cryptomgr.notests"
  cmdline+=" no_timer_check"
  cmdline+=" pillar.name=$name pillar.uuid=$(vm_uuid "$name") pillar.src=$E2E_SRC"
  [[ -n "$ip" ]] && cmdline+=" pillar.ip=$ip"
  [[ -n "$append" ]] && cmdline+=" $append"
  [[ "$E2E_INITRD" == /boot/* ]] && cmdline+=" root=/dev/vda rw init=/sbin/pillar-init"
  # CPU: qemu64 + the x86-64-v2 extensions. "-cpu max" adds AVX & co., which
  # TCG emulates slowly (memcpy-heavy work ran 2.5x slower).
  local cpu="${PILLAR_E2E_CPU:-qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt}"
  # shellcheck disable=SC2054  # commas belong to QEMU option values
  local args=(
    -name "pillar-e2e-$name" -machine q35 -accel tcg,tb-size=256 -cpu "$cpu" -smp 1 -m "$mem"
    -nodefaults -display none -monitor none -no-reboot
    -serial "file:$dir/console.log"
    -kernel "$E2E_KERNEL" -initrd "$E2E_INITRD" -append "$cmdline"
    -drive "file=$dir/disk0.qcow2,if=none,id=root,format=qcow2,cache=unsafe,discard=unmap"
    -device virtio-blk-pci,drive=root,serial=pillar-root,addr=0x2
    -virtfs "local,path=$dir/share,mount_tag=pillar-ctl,security_model=none,id=fsctl"
    -virtfs "local,path=$E2E_SRC,mount_tag=pillar-src,security_model=none,readonly=on,id=fssrc"
    -device virtio-serial-pci
    -chardev "pipe,id=ctl,path=$dir/ctl" -device virtserialport,chardev=ctl,name=pillar.ctl
    -device virtio-rng-pci
  )
  local share n=0
  for share in ${PILLAR_E2E_SHARES:-}; do
    [[ "$share" =~ ^[a-z][a-z0-9-]*=/[A-Za-z0-9._/+-]+$ ]] || e2e_die "PILLAR_E2E_SHARES: bad entry '$share' (want TAG=/DIR)"
    args+=(-virtfs "local,path=${share#*=},mount_tag=${share%%=*},security_model=none,readonly=on,id=fsx$n")
    n=$((n + 1))
  done
  local i=1 size
  for size in "${disks[@]}"; do
    if [[ -e "$dir/disk$i.qcow2" ]]; then :
    elif [[ $size == image:* ]]; then qemu-img create -q -f qcow2 -b "${size#image:}" -F raw "$dir/disk$i.qcow2"
    else qemu-img create -q -f qcow2 "$dir/disk$i.qcow2" "$size"
    fi
    args+=(-drive "file=$dir/disk$i.qcow2,if=none,id=data$i,format=qcow2,cache=unsafe,discard=unmap"
      -device "virtio-blk-pci,drive=data$i,serial=pillar-data$i")
    i=$((i + 1))
  done
  if [[ $net -eq 1 ]]; then
    slot="$(e2e__slot "$name")" || e2e_die "vm_start: no free network slot"
    args+=(-netdev "socket,id=n0,udp=127.0.0.1:$((E2E_NET_BASE + 2 * slot)),localaddr=127.0.0.1:$((E2E_NET_BASE + 2 * slot + 1))"
      -device "virtio-net-pci,netdev=n0,mac=52:54:00:99:00:$(printf '%02x' $((slot + 1)))")
  fi
  printf '%s\n' "$ip" >"$dir/ip"
  : >"$dir/console.log"
  e2e__now >"$dir/start_us"
  qemu-system-x86_64 "${args[@]}" </dev/null >"$dir/qemu.log" 2>&1 &
  echo $! >"$dir/pid"
}

# vm_wait_ready NAME [TIMEOUT_S=120]: wait until the guest's control daemon
# answers. Prints the boot time; fails (with the console tail) if QEMU died.
vm_wait_ready() {
  local name="$1" timeout="${2:-120}" dir start deadline
  dir="$(vm_dir "$name")"
  start="$(<"$dir/start_us")"
  deadline=$(($(e2e__now) + timeout * 1000000))
  while [[ ! -s "$dir/share/ready" ]]; do
    if ! vm_running "$name"; then
      e2e__dump "$name"
      e2e_log "$name: QEMU exited during boot"
      return 1
    fi
    if [[ $(e2e__now) -gt $deadline ]]; then
      e2e__dump "$name"
      e2e_log "$name: not ready after ${timeout}s"
      return 1
    fi
    e2e__sleep 0.05
  done
  vm_exec "$name" --timeout 30 true || { e2e__dump "$name"; return 1; }
  local ms
  ms=$(e2e__ms_since "$start")
  printf '%s\n' "$ms" >"$dir/ready_ms"
  e2e_log "$name ready in ${ms} ms (guest: $(cut -d' ' -f3 "$dir/share/ready") s uptime)"
}

e2e__dump() {
  local dir
  dir="$(vm_dir "$1")"
  {
    echo "---- $1 console (last 40 lines): $dir/console.log"
    tail -n 40 "$dir/console.log" 2>/dev/null
    echo "---- $1 qemu log"
    tail -n 20 "$dir/qemu.log" 2>/dev/null
  } >&2
}

# vm_stop NAME [--keep-disk] [--force]: stop a guest (sync first unless
# --force, then SIGTERM to QEMU, SIGKILL after 10 s). Disks are deleted unless
# --keep-disk (for a later vm_start NAME --keep-disk).
vm_stop() {
  local -
  set +e
  local name="$1" keep=0 force=0 pid dir
  shift
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --keep-disk) keep=1 ;;
      --force) force=1 ;;
      *) e2e_die "vm_stop: unknown option $1" ;;
    esac
    shift
  done
  dir="$(vm_dir "$name")"
  if vm_running "$name"; then
    pid="$(e2e__pid "$name")"
    [[ $force -eq 0 && -s "$dir/share/ready" ]] && vm_exec "$name" --timeout 10 sync >/dev/null 2>&1
    kill -TERM "$pid" 2>/dev/null
    local i
    for ((i = 0; i < 200; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      e2e__sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -f "$dir/pid"
  [[ $keep -eq 1 || "${PILLAR_E2E_KEEP:-0}" == 1 ]] || rm -f "$dir"/disk*.qcow2
}

# vm_restart NAME: stop and boot again with the same disks and options (the
# guest sees a reboot: configfs/nvmet/LIO state is gone, files persist).
vm_restart() {
  local name="$1" dir
  local -a args=()
  dir="$(vm_dir "$name")"
  [[ -s "$dir/args" ]] && mapfile -d '' -t args <"$dir/args"
  vm_stop "$name" --keep-disk
  vm_start "$name" "${args[@]}" --keep-disk
  vm_wait_ready "$name"
}

# vm_stop_all: stop every guest and the hub. Runs from the EXIT trap.
vm_stop_all() {
  local rc=$? d pid
  local -
  set +e
  [[ $E2E_INITED -eq 1 && -n "$E2E_RUN" ]] || return "$rc"
  # Only the shell that started the guests cleans up (not subshells).
  [[ "${BASHPID:-$$}" == "$E2E_OWNER_PID" ]] || return "$rc"
  for d in "$E2E_RUN"/vm/*/; do
    [[ -s "$d/pid" ]] && kill -TERM "$(<"$d/pid")" 2>/dev/null
  done
  [[ -s "$E2E_RUN/net/hub.pid" ]] && kill -TERM "$(<"$E2E_RUN/net/hub.pid")" 2>/dev/null
  local i alive pids=()
  mapfile -t pids < <(cat "$E2E_RUN"/vm/*/pid "$E2E_RUN/net/hub.pid" 2>/dev/null)
  for ((i = 0; i < 100; i++)); do
    alive=0
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && alive=1
    done
    [[ $alive -eq 0 ]] && break
    e2e__sleep 0.05
  done
  for pid in "${pids[@]}"; do
    kill -KILL "$pid" 2>/dev/null
  done
  : >"$E2E_RUN/stopped"
  [[ -s "$E2E_RUN/watchdog.pid" ]] && kill "$(<"$E2E_RUN/watchdog.pid")" 2>/dev/null
  wait 2>/dev/null
  rm -f "$E2E_RUN"/vm/*/pid "$E2E_RUN/net/hub.pid" "$E2E_RUN/watchdog.pid"
  if [[ "${PILLAR_E2E_KEEP:-0}" != 1 ]]; then
    rm -f "$E2E_RUN"/vm/*/disk*.qcow2
    rm -rf "$E2E_RUN"/vm/*/share/ctl
  fi
  E2E_INITED=0
  e2e_log "all guests stopped; logs in $E2E_RUN/vm/*/console.log"
  return "$rc"
}

# ---------------------------------------------------------------- commands

# e2e__submit NAME [opts] [--] CMD...: write a request, ring the doorbell,
# print "ID TIMEOUT". Options: --timeout S (default 600), --stdin FILE ('-' for
# this shell's stdin), --cwd DIR, --env K=V (repeatable).
e2e__submit() {
  local name="$1" timeout=600 stdin="" cwd="" envs=() dir id req
  shift
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --timeout) timeout="$2"; shift 2 ;;
      --stdin) stdin="$2"; shift 2 ;;
      --cwd) cwd="$2"; shift 2 ;;
      --env) envs+=("$2"); shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [[ $# -gt 0 ]] || { e2e_log "vm_exec: no command"; return 2; }
  vm_running "$name" || { e2e_log "vm_exec: $name is not running"; return 2; }
  dir="$(vm_dir "$name")"
  id="$(e2e__now).${BASHPID:-$$}.$RANDOM"
  req="$dir/share/ctl/$id"
  mkdir -p "$req"
  printf '%s\0' "$@" >"$req/argv"
  [[ ${#envs[@]} -gt 0 ]] && printf '%s\0' "${envs[@]}" >"$req/env"
  [[ -n "$cwd" ]] && printf '%s' "$cwd" >"$req/cwd"
  if [[ "$stdin" == - ]]; then
    cat >"$req/stdin"
  elif [[ -n "$stdin" ]]; then
    cp -- "$stdin" "$req/stdin"
  fi
  # O_RDWR on a FIFO never blocks, even if QEMU is gone; a line is one write.
  local fd
  exec {fd}<>"$dir/ctl.in"
  printf 'run %s\n' "$id" >&"$fd"
  exec {fd}>&-
  printf '%s %s\n' "$id" "$timeout"
}

# e2e__collect NAME ID TIMEOUT: wait for the request, print its stdout and
# stderr, return its exit code (124 on timeout, 255 if the guest died).
e2e__collect() {
  local -
  set +e
  local name="$1" id="$2" timeout="$3" dir req rc="" start now n=0
  dir="$(vm_dir "$name")"
  req="$dir/share/ctl/$id"
  start=$(e2e__now)
  while :; do
    if [[ -s "$req/rc" ]]; then
      read -r rc <"$req/rc" || true
      [[ "$rc" =~ ^[0-9]+$ ]] && break
    fi
    n=$((n + 1))
    if ((n % 20 == 0)); then
      now=$(e2e__now)
      if ! vm_running "$name"; then
        rc=255
        e2e_log "vm_exec $name: guest died while running: $(tr '\0' ' ' <"$req/argv")"
        break
      fi
      if ((now - start > timeout * 1000000)); then
        vm_kill_req "$name" "$id"
        e2e__sleep 0.5
        rc=124
        e2e_log "vm_exec $name: timeout after ${timeout}s: $(tr '\0' ' ' <"$req/argv")"
        break
      fi
    fi
    # Poll fast first (most commands are short), slower for long ones.
    if ((n < 200)); then e2e__sleep 0.005; elif ((n < 1000)); then e2e__sleep 0.02; else e2e__sleep 0.1; fi
  done
  [[ -s "$req/stdout" ]] && cat "$req/stdout"
  [[ -s "$req/stderr" ]] && cat "$req/stderr" >&2
  [[ "${PILLAR_E2E_KEEP:-0}" == 1 ]] || rm -rf "$req"
  return "$rc"
}

# vm_exec NAME [--timeout S] [--stdin FILE|-] [--cwd DIR] [--env K=V]... [--] CMD...
# Runs CMD (an argv, no shell involved) in the guest as root; prints its
# stdout and stderr when it ends and returns its exit code.
vm_exec() {
  local name="$1" sub
  shift
  sub="$(e2e__submit "$name" "$@")" || return $?
  e2e__collect "$name" "${sub% *}" "${sub#* }"
}

# vm_sh NAME 'SCRIPT' [ARGS...]: run a bash script in the guest (ARGS become $1...).
vm_sh() {
  local name="$1" script="$2"
  shift 2
  vm_exec "$name" bash -c "$script" bash "$@"
}

# vm_exec_bg NAME [opts] CMD...: start CMD and print its request ID at once.
# Then: vm_bg_wait NAME ID [TIMEOUT_S], vm_bg_log NAME ID, vm_kill_req NAME ID.
vm_exec_bg() {
  local name="$1" sub
  shift
  sub="$(e2e__submit "$name" "$@")" || return $?
  printf '%s\n' "${sub% *}"
}

vm_bg_wait() { e2e__collect "$1" "$2" "${3:-600}"; }

vm_bg_running() {
  local req
  req="$(vm_dir "$1")/share/ctl/$2"
  [[ -d "$req" && ! -s "$req/rc" ]]
}

# vm_bg_log NAME ID: what a background request printed so far.
vm_bg_log() {
  local req
  req="$(vm_dir "$1")/share/ctl/$2"
  cat "$req/stdout" 2>/dev/null
  cat "$req/stderr" >&2 2>/dev/null
  return 0
}

# vm_kill_req NAME ID: SIGKILL a request's whole process group in the guest.
vm_kill_req() {
  local dir fd
  dir="$(vm_dir "$1")"
  exec {fd}<>"$dir/ctl.in"
  printf 'kill %s\n' "$2" >&"$fd"
  exec {fd}>&-
}

# vm_copy_out NAME GUEST_PATH HOST_DIR: copy a file or directory from the guest.
vm_copy_out() {
  local name="$1" src="$2" dest="$3" dir tag
  dir="$(vm_dir "$name")"
  tag="copy.$(e2e__now).$RANDOM"
  vm_exec "$name" bash -c 'mkdir -p "/e2e/out/$2" && cp -a -- "$1" "/e2e/out/$2/"' bash "$src" "$tag" || return $?
  mkdir -p "$dest"
  cp -a "$dir/share/out/$tag/." "$dest/"
  rm -rf "${dir:?}/share/out/$tag"
}

# vm_copy_in NAME HOST_PATH GUEST_DIR: copy a file or directory into the guest.
vm_copy_in() {
  local name="$1" src="$2" dest="$3" dir tag
  dir="$(vm_dir "$name")"
  tag="copy.$(e2e__now).$RANDOM"
  mkdir -p "$dir/share/out/$tag"
  cp -a -- "$src" "$dir/share/out/$tag/"
  vm_exec "$name" bash -c 'mkdir -p "$2" && cp -a -- "/e2e/out/$1/." "$2/"' bash "$tag" "$dest"
  local rc=$?
  rm -rf "${dir:?}/share/out/$tag"
  return "$rc"
}

# ---------------------------------------------------------------- network and identities

# vm_set_ip NAME IFACE ADDR/LEN [WHEN_FILE]: replace IFACE's addresses (e.g.
# a consumer whose IP changes). WHEN_FILE receives the guest's clock (µs)
# the moment the new address was in place, for figures on that guest's clock.
vm_set_ip() {
  local name="$1" iface="$2" addr="$3" when="${4:-/dev/null}"
  vm_exec "$name" bash -c 'ip addr flush dev "$1" && ip addr add "$2" dev "$1" && ip link set "$1" up &&
    date +%s%6N' bash "$iface" "$addr" >"$when" || return $?
  [[ "$iface" == eth0 ]] && printf '%s\n' "$addr" >"$(vm_dir "$name")/ip"
  return 0
}

# vm_ip NAME: eth0's address (without prefix length), as set by --ip / vm_set_ip.
vm_ip() {
  local a
  a="$(<"$(vm_dir "$1")/ip")"
  printf '%s\n' "${a%/*}"
}

# vm_uuid NAME: the guest's NVMe host ID (its host NQN is
# nqn.2014-08.org.nvmexpress:uuid:<this>), derived from the name at boot.
vm_uuid() {
  local h
  h="$(printf 'pillar-e2e:%s' "$1" | md5sum)"
  printf '%s-%s-%s-%s-%s\n' "${h:0:8}" "${h:8:4}" "${h:12:4}" "${h:16:4}" "${h:20:12}"
}

# The identities a guest currently has (a test may change them in the guest).
vm_hostnqn() { vm_exec "$1" cat /etc/nvme/hostnqn; }
vm_iqn() { vm_exec "$1" sed -n 's/^InitiatorName=//p' /etc/iscsi/initiatorname.iscsi; }
