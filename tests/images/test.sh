#!/usr/bin/env bash
# Checks the OCI image archives that scripts/build-images.sh makes, without a
# container engine: each archive is copied into an OCI layout (skopeo) and
# unpacked into a bundle (umoci); its config is checked (entrypoint, user,
# labels) and its binaries and tools are run inside the unpacked root with
# chroot (in a mount and PID namespace of their own, with /proc and a minimal
# /dev, as the image's user). ldd on every pillar binary in the root must find
# every library; a canary proves that check fails on a missing library.
#
#   tests/images/test.sh [--build] [COMPONENT...]   COMPONENT: agent controller node (default: all)
#
# --build runs scripts/build-images.sh first (one more check). The archives
# are ${PILLAR_BUILD_DIR:-build}/images/pillar-COMPONENT-*.oci.tar. Every
# check is one pass or one failure; a check that cannot run is a failure,
# never a skip. Ends with "images: N passed, M failed"; exits non-zero on any
# failure.
set -euo pipefail
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
PATH_IN_ROOT=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# Internal: ROOT USERSPEC CMD... runs CMD in ROOT. Called by in_root inside
# fresh namespaces, so the mounts vanish with it.
if [[ "${1:-}" == --in-root ]]; then
  root=$2 userspec=$3
  shift 3
  mount -t proc proc "$root/proc"
  mount -t tmpfs -o mode=0755,size=1m,nosuid pillar-test-dev "$root/dev"
  for node in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
    IFS=: read -r name major minor <<<"$node"
    mknod -m 0666 "$root/dev/$name" c "$major" "$minor"
  done
  exec chroot --userspec="$userspec" "$root" /usr/bin/env -i PATH="$PATH_IN_ROOT" LC_ALL=C "$@"
fi

cd "$(dirname "$0")/../.."
BUILD=${PILLAR_BUILD_DIR:-build}
pass=0 fail=0 tmp=""

finish() {
  local rc=$?
  if [[ -n "$tmp" && -d "$tmp" ]]; then rm -rf "$tmp"; fi
  if ((rc != 0 && fail == 0)); then
    echo "FAIL the test stopped early (exit $rc)"
    fail=$((fail + 1))
  fi
  echo "images: $pass passed, $fail failed"
  ((fail == 0)) || exit 1
}
trap finish EXIT

ok() {
  pass=$((pass + 1))
  echo "PASS $1"
}
bad() { # NAME OUTPUT
  fail=$((fail + 1))
  echo "FAIL $1"
  if [[ -n "${2:-}" ]]; then tail -n 20 <<<"$2" | sed 's/^/    /'; fi
}
# check NAME CMD...: passes when CMD exits 0.
check() {
  local name=$1 out rc=0
  shift
  out=$("$@" 2>&1) || rc=$?
  if ((rc == 0)); then ok "$name"; else bad "$name (exit $rc)" "$out"; fi
}

# in_root ROOT USERSPEC CMD...
in_root() {
  local root=$1 userspec=$2
  shift 2
  unshare --fork --pid --mount --propagation private -- "$SELF" --in-root "$root" "$userspec" "$@"
}

# version_is ROOT USERSPEC BINARY VERSION: BINARY --version prints "BINARY VERSION".
version_is() {
  local root=$1 userspec=$2 bin=$3 want="$3 $4" out
  out=$(in_root "$root" "$userspec" "/usr/local/bin/$bin" --version) || return
  [[ "$out" == "$want" ]] || { echo "printed \"$out\", expected \"$want\""; return 1; }
}

# ldd_clean ROOT BINARY: ldd in ROOT finds every library of BINARY.
ldd_clean() {
  local out rc=0
  out=$(in_root "$1" 0:0 ldd "/usr/local/bin/$2" 2>&1) || rc=$?
  if grep 'not found' <<<"$out"; then return 1; fi
  ((rc == 0)) || { printf '%s\n' "$out"; return "$rc"; }
  grep -q 'libc\.so\.6' <<<"$out" || { echo "ldd shows no libc: not a dynamic binary?"; return 1; }
}

# output_has ROOT PATTERN CMD...: CMD's output (any exit code) matches the
# extended regex PATTERN. For tools whose only version switch exits non-zero.
output_has() {
  local root=$1 pattern=$2 out
  shift 2
  out=$(in_root "$root" 0:0 "$@" 2>&1) || true
  grep -Eq "$pattern" <<<"$out" || { printf '%s\n' "$out"; echo "(no match for /$pattern/)"; return 1; }
}

# on_path ROOT CMD...: every CMD is an executable on the image's PATH.
on_path() {
  local root=$1 c missing=()
  shift
  for c in "$@"; do
    # shellcheck disable=SC2016 # $1 is the inner shell's
    in_root "$root" 0:0 sh -c 'command -v "$1"' sh "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  ((${#missing[@]} == 0)) || { echo "not on PATH: ${missing[*]}"; return 1; }
}

save_config() { skopeo inspect --config "oci:$1" >"$2"; }

# no_host_files ROOT: neither what debootstrap copies from the build host nor
# the identities that packages generate when installed (every node would
# share them; they come from the host at run time).
no_host_files() {
  local f found=()
  [[ -d "$1/etc" ]] || { echo "no root at $1"; return 1; }
  for f in etc/resolv.conf etc/hostname etc/hostid etc/nvme/hostnqn etc/nvme/hostid \
    etc/iscsi/initiatorname.iscsi; do
    if [[ -e "$1/$f" ]]; then found+=("/$f"); fi
  done
  ((${#found[@]} == 0)) || { echo "present: ${found[*]}"; return 1; }
}

label() { jq -r --arg k "org.opencontainers.image.$2" '.config.Labels[$k] // ""' "$1"; }

declare -A BINARIES=([agent]="pillar-agent" [controller]="pillar-controller pillarctl" [node]="pillar-node")
declare -A USER_OF=([agent]=0:0 [controller]=65532:65532 [node]=0:0)
# The programs each component runs (src/*/: exec'd argv[0]s).
declare -A RUNS=(
  [agent]="lvs vgs lvcreate lvextend lvchange lvremove exportfs modprobe losetup zfs"
  [controller]=""
  [node]="nvme iscsiadm mount umount blkid mkfs.ext4 mkfs.xfs resize2fs xfs_growfs mount.nfs4 ip"
)

# The tools' own version commands.
tool_checks() {
  local c=$1 r=$2
  case "$c" in
    node)
      check "node: nvme version" in_root "$r" 0:0 nvme version
      check "node: iscsiadm --version" in_root "$r" 0:0 iscsiadm --version
      check "node: mkfs.ext4 -V" in_root "$r" 0:0 mkfs.ext4 -V
      check "node: mkfs.xfs -V" in_root "$r" 0:0 mkfs.xfs -V
      check "node: blkid -V" in_root "$r" 0:0 blkid -V
      check "node: mount --version" in_root "$r" 0:0 mount --version
      check "node: mount.nfs4 -V" in_root "$r" 0:0 mount.nfs4 -V
      check "node: modprobe --version" in_root "$r" 0:0 modprobe --version
      check "node: ip -V" in_root "$r" 0:0 ip -V
      ;;
    agent)
      check "agent: lvm version" in_root "$r" 0:0 lvm version
      # exportfs has no version switch: -h prints its usage and exits non-zero.
      check "agent: exportfs -h prints its usage" output_has "$r" '^usage: exportfs' exportfs -h
      check "agent: losetup --version" in_root "$r" 0:0 losetup --version
      check "agent: modprobe --version" in_root "$r" 0:0 modprobe --version
      check "agent: mkfs.ext4 -V" in_root "$r" 0:0 mkfs.ext4 -V
      # Without the zfs module, "zfs version" fails before printing; -? is
      # the userland's own usage (exit 0).
      check "agent: zfs -?" in_root "$r" 0:0 zfs -?
      check "agent: zpool -?" in_root "$r" 0:0 zpool -?
      ;;
    controller)
      check "controller: CA bundle present" test -s "$r/etc/ssl/certs/ca-certificates.crt"
      ;;
  esac
}

test_image() {
  local c=$1 archives a work cfg b version revision short
  mapfile -t archives < <(compgen -G "$BUILD/images/pillar-$c-*.oci.tar" || true)
  # A step that fails leaves the later ones to fail too (each counted): none
  # is skipped.
  a=${archives[0]:-}
  if ((${#archives[@]} == 1)); then
    ok "$c: archive $(basename "$a") ($(du -h --apparent-size "$a" | cut -f1))"
  else
    bad "$c: exactly one archive $BUILD/images/pillar-$c-*.oci.tar (found ${#archives[@]})"
  fi
  work="$tmp/$c"
  mkdir -p "$work"
  check "$c: skopeo copies the archive into an OCI layout" \
    skopeo copy --quiet "oci-archive:$a" "oci:$work/layout:test"
  check "$c: umoci unpacks it" umoci unpack --image "$work/layout:test" "$work/bundle"
  local r="$work/bundle/rootfs"
  cfg="$work/config.json"
  check "$c: image config readable" save_config "$work/layout:test" "$cfg"

  local want_ep
  want_ep=$(jq -cn --arg e "/usr/local/bin/pillar-$c" '[$e]')
  check "$c: entrypoint is $want_ep" test "$(jq -c '.config.Entrypoint' "$cfg")" = "$want_ep"
  check "$c: user is ${USER_OF[$c]}" test "$(jq -r '.config.User // ""' "$cfg")" = "${USER_OF[$c]}"
  check "$c: title label is pillar-$c" test "$(label "$cfg" title)" = "pillar-$c"
  version=$(label "$cfg" version)
  revision=$(label "$cfg" revision)
  check "$c: version label $version is NAME VERSION's" \
    grep -Eqx '[0-9]+\.[0-9]+\.[0-9]+(\+g[0-9a-f]{7}(\.dirty)?)?' <<<"$version"
  check "$c: version label is the build's ($BUILD/src/controller/pillar-controller --version)" \
    test "pillar-controller $version" = "$("$BUILD/src/controller/pillar-controller" --version 2>&1)"
  short=$(sed -n 's/.*+g\([0-9a-f]\{7\}\).*/\1/p' <<<"$version")
  if [[ -n "$short" ]]; then
    check "$c: revision label $revision is the commit of the version" \
      grep -Eqx "${short}[0-9a-f]{33}" <<<"$revision"
  else
    check "$c: revision label is \"unknown\" (no commit in the version)" test "$revision" = unknown
  fi
  check "$c: source label set" test -n "$(label "$cfg" source)"
  check "$c: no host files or generated identities in the root (resolv.conf, hostid, hostnqn, initiatorname)" \
    no_host_files "$r"

  for b in ${BINARIES[$c]}; do
    check "$c: $b --version as ${USER_OF[$c]} prints \"$b $version\"" version_is "$r" "${USER_OF[$c]}" "$b" "$version"
    check "$c: ldd $b finds every library" ldd_clean "$r" "$b"
  done
  if [[ -n "${RUNS[$c]}" ]]; then
    # shellcheck disable=SC2086 # a list of command names
    check "$c: every program pillar-$c runs is on PATH" on_path "$r" ${RUNS[$c]}
  fi
  tool_checks "$c" "$r"
}

# The ldd check must be able to fail: remove a library pillar-controller
# loads from a copy of its root and expect the check to say so.
canary() {
  local r="$tmp/controller/bundle/rootfs" lib
  if [[ ! -d "$r" ]]; then
    bad "canary: ldd check fails without libsqlite3 (no controller root to try it on)"
    return 0
  fi
  lib=$(find "$r/usr/lib" "$r/lib" -name 'libsqlite3.so.0*' 2>/dev/null | head -n1 || true)
  if [[ -z "$lib" ]]; then
    bad "canary: ldd check fails without libsqlite3 (libsqlite3 not in the controller root)"
    return 0
  fi
  find "$r/usr/lib" "$r/lib" -name 'libsqlite3.so.0*' -delete 2>/dev/null || true
  local out
  if out=$(ldd_clean "$r" pillar-controller 2>&1); then
    bad "canary: ldd check fails without libsqlite3 (it passed)" "$out"
  elif grep -q 'libsqlite3.so.0 => not found' <<<"$out"; then
    ok "canary: ldd check fails without libsqlite3"
  else
    bad "canary: ldd check fails without libsqlite3 (failed, but not on libsqlite3)" "$out"
  fi
}

main() {
  local do_build=0 c
  local -a want=()
  while (($#)); do
    case "$1" in
      --build) do_build=1 ;;
      agent | controller | node) want+=("$1") ;;
      *)
        bad "usage: $0 [--build] [agent|controller|node]... (unknown argument $1)"
        return 0
        ;;
    esac
    shift
  done
  ((${#want[@]})) || want=(agent controller node)
  if [[ $EUID -ne 0 ]]; then
    bad "setup: run as root (chroot, mount namespaces)"
    return 0
  fi
  check "setup: host tools (scripts/build-images.sh --install-deps)" ./scripts/build-images.sh --install-deps
  if ((do_build)); then
    echo "---- scripts/build-images.sh ${want[*]}"
    if PILLAR_BUILD_DIR="$BUILD" ./scripts/build-images.sh "${want[@]}"; then
      ok "scripts/build-images.sh ${want[*]}"
    else
      bad "scripts/build-images.sh ${want[*]}"
    fi
  fi
  tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/pillar-images-test.XXXXXX")
  for c in "${want[@]}"; do
    echo "---- pillar-$c"
    test_image "$c"
  done
  if [[ " ${want[*]} " == *" controller "* ]]; then
    echo "---- canary"
    canary
  fi
}

main "$@"
