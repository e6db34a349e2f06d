#!/usr/bin/env bash
# Build (or reuse) the guest root image for the real-kernel e2e tests.
#
#   tests/e2e/build-image.sh [--force]
#
# Prints the path of the raw ext4 image on stdout. The image is cached under
# ${PILLAR_E2E_CACHE:-/var/cache/pillar-e2e}, keyed by a hash of the package
# list, the guest kernel version and the files that shape the image; a cached
# image is reused as is. Guests never write to it: each gets a qcow2 overlay.
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=deps.sh
source "$E2E_DIR/deps.sh"
# shellcheck source=nvme-auth-modules.sh
source "$E2E_DIR/nvme-auth-modules.sh"
# shellcheck source=zfs-modules.sh
source "$E2E_DIR/zfs-modules.sh"

FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

SUITE=bookworm
IMAGE_SIZE="${PILLAR_E2E_IMAGE_SIZE:-4G}"

# First URI of an enabled "deb" source for SUITE in the host's apt config
# (deb822 *.sources and one-line *.list formats).
host_mirror() {
  local suite="$1" f uri=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r "$f" ]] || continue
    uri="$(awk -v want="$suite" '
      BEGIN { RS = ""; FS = "\n" }
      {
        types = ""; uris = ""; suites = ""; enabled = "yes"
        for (i = 1; i <= NF; i++) {
          line = $i
          if (line ~ /^#/) continue
          key = tolower(line); sub(/:.*/, "", key)
          val = line; sub(/^[^:]*:[ \t]*/, "", val)
          if (key == "types") types = val
          else if (key == "uris") uris = val
          else if (key == "suites") suites = val
          else if (key == "enabled") enabled = tolower(val)
        }
        if (enabled == "no") next
        if ((" " types " ") !~ / deb /) next
        n = split(suites, s, /[ \t]+/)
        for (j = 1; j <= n; j++) if (s[j] == want) { split(uris, u, /[ \t]+/); print u[1]; exit }
      }' "$f")"
    [[ -n "$uri" ]] && { printf '%s\n' "$uri"; return 0; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -r "$f" ]] || continue
    uri="$(awk -v want="$suite" '
      $1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
        if ($(i + 1) == want) { print $i; exit }
      }' "$f")"
    [[ -n "$uri" ]] && { printf '%s\n' "$uri"; return 0; }
  done
  return 1
}

main() {
  local kver image
  kver="$(e2e_kernel_version)"
  image="$(e2e_image_path "$kver")"
  if [[ $FORCE -eq 0 && -s "$image" && -s "$(e2e_initrd_path "$image")" ]]; then
    e2e_log "reusing cached image $image"
    printf '%s\n' "$image"
    return 0
  fi

  [[ $EUID -eq 0 ]] || e2e_die "build-image.sh must run as root (debootstrap, chroot)"
  e2e_deps_install
  mkdir -p "$E2E_CACHE"
  # Serialize concurrent builds; a second builder reuses the first one's image.
  exec {lockfd}>"$E2E_CACHE/.build.lock"
  flock "$lockfd"
  if [[ $FORCE -eq 0 && -s "$image" && -s "$(e2e_initrd_path "$image")" ]]; then
    e2e_log "reusing cached image $image (built concurrently)"
    printf '%s\n' "$image"
    return 0
  fi

  local mirror security t0
  t0=$SECONDS
  mirror="${PILLAR_E2E_MIRROR:-$(host_mirror "$SUITE" || true)}"
  [[ -n "$mirror" ]] || e2e_die "no apt source for $SUITE found in /etc/apt; set PILLAR_E2E_MIRROR"
  security="${PILLAR_E2E_SECURITY_MIRROR:-$(host_mirror "$SUITE-security" || true)}"
  e2e_log "building guest image for kernel $kver (mirror $mirror)"

  WORK="$(mktemp -d "$E2E_CACHE/build.XXXXXX")"
  ROOT="$WORK/root"
  trap cleanup_build EXIT

  local base
  base="$(build_base "$mirror" "$security")"
  e2e_log "copying base root $base"
  cp -a "$base" "$ROOT"

  # Kernel modules of the guest kernel (the kernel itself boots via -kernel).
  # Drop hardware classes a virtio guest never uses to keep the image small.
  mkdir -p "$ROOT/lib/modules"
  cp -a "/lib/modules/$kver" "$ROOT/lib/modules/"
  local d
  for d in drivers/gpu drivers/media drivers/net/wireless drivers/bluetooth drivers/staging \
    drivers/iio drivers/hid drivers/input/touchscreen drivers/usb/gadget sound net/wireless \
    net/bluetooth net/mac80211; do
    rm -rf "$ROOT/lib/modules/$kver/kernel/$d"
  done
  # DH-HMAC-CHAP needs nvme modules built with in-band authentication.
  install_nvme_auth_modules "$kver" "$ROOT"
  # ZFS pools: the modules of the zfsutils-linux version in the root.
  install_zfs_modules "$kver" "$ROOT" "$mirror"
  depmod -b "$ROOT" "$kver"

  configure_root "$kver"

  build_initramfs "$kver" "$WORK/initrd.cpio"
  mv "$WORK/initrd.cpio" "$(e2e_initrd_path "$image")"
  if extract_vmlinux "/boot/vmlinuz-$kver" "$WORK/vmlinux"; then
    mv "$WORK/vmlinux" "$(e2e_vmlinux_path "$image")"
  else
    e2e_log "could not extract an ELF vmlinux from /boot/vmlinuz-$kver: guests boot the bzImage (slower)"
    rm -f "$(e2e_vmlinux_path "$image")"
  fi

  truncate -s "$IMAGE_SIZE" "$WORK/root.raw"
  mkfs.ext4 -q -F -L pillar-root -d "$ROOT" "$WORK/root.raw"
  mv "$WORK/root.raw" "$image"
  # Drop stale cache entries (other keys); running guests keep their open files.
  local f
  for f in "$E2E_CACHE"/pillar-root-* "$E2E_CACHE"/base-*; do
    [[ -e "$f" ]] || continue
    case "$f" in "${image%.raw}".* | "$base") ;; *) rm -rf "$f" ;; esac
  done
  e2e_log "guest image built in $((SECONDS - t0)) s: $image ($(du -h --apparent-size "$image" | cut -f1) virtual, $(du -h "$image" | cut -f1) used)"
  printf '%s\n' "$image"
}

# Stage 1: debootstrap + guest packages, cached separately (keyed by the
# package list and BASE_VERSION) so that changes to the guest scripts or the
# kernel only redo the fast second stage.
BASE_VERSION=2
build_base() {
  local mirror="$1" security="$2" key base t0=$SECONDS
  key="$( { printf 'base v%s %s\n' "$BASE_VERSION" "$SUITE"; e2e_guest_packages; } | sha256sum | cut -c1-16)"
  base="$E2E_CACHE/base-$key"
  if [[ $FORCE -eq 0 && -d "$base" ]]; then
    printf '%s\n' "$base"
    return 0
  fi
  rm -rf "$base"
  local broot="$WORK/base"
  local -a pkgs
  mapfile -t pkgs < <(e2e_guest_packages)
  e2e_log "debootstrap $SUITE (minbase) + guest packages: about a minute on an idle machine ..."
  debootstrap --variant=minbase --components=main \
    --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$SUITE" "$broot" "$mirror" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -n 30 "$WORK/debootstrap.log" >&2; e2e_die "debootstrap failed"; }
  e2e_log "debootstrap done ($((SECONDS - t0)) s)"
  {
    # contrib: zfsutils-linux (its kernel modules come from zfs-modules.sh).
    printf 'deb %s %s main contrib\n' "$mirror" "$SUITE"
    printf 'deb %s %s-updates main contrib\n' "$mirror" "$SUITE"
    if [[ -n "$security" ]]; then printf 'deb %s %s-security main contrib\n' "$security" "$SUITE"; fi
  } >"$broot/etc/apt/sources.list"
  # No service may start inside the chroot.
  printf '#!/bin/sh\nexit 101\n' >"$broot/usr/sbin/policy-rc.d"
  chmod 755 "$broot/usr/sbin/policy-rc.d"
  CHROOT_PROC="$broot/proc"
  mount -t proc proc "$CHROOT_PROC"
  if ! chroot "$broot" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get update -qq >"$WORK/apt.log" 2>&1 ||
    ! chroot "$broot" env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
      apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >>"$WORK/apt.log" 2>&1; then
    tail -n 30 "$WORK/apt.log" >&2
    e2e_die "apt-get install in the guest root failed"
  fi
  chroot "$broot" apt-get clean
  umount "$CHROOT_PROC"
  CHROOT_PROC=""
  rm -f "$broot/usr/sbin/policy-rc.d"
  rm -rf "$broot/usr/share/doc" "$broot/usr/share/man" "$broot/usr/share/info" \
    "$broot/usr/share/locale" "$broot/var/lib/apt/lists"/* "$broot/var/cache/apt"/*.bin
  mkdir -p "$broot/var/lib/apt/lists/partial"
  mv "$broot" "$base"
  e2e_log "guest packages installed ($((SECONDS - t0)) s), cached as $base"
  printf '%s\n' "$base"
}

# The uncompressed ELF kernel inside a bzImage. QEMU boots it through its PVH
# entry point, which skips the in-guest decompression (~3 s under TCG).
extract_vmlinux() {
  local bz="$1" out="$2" magic tool off
  for magic in 'xz:\xFD7zXZ\x00' 'zstd:\x28\xB5\x2F\xFD' 'gzip:\x1F\x8B\x08\x00'; do
    tool="${magic%%:*}"
    command -v "$tool" >/dev/null || continue
    while read -r off; do
      tail -c "+$((off + 1))" "$bz" | "$tool" -dcq >"$out" 2>/dev/null || true
      if [[ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' ')" == 7f454c46 ]]; then
        return 0
      fi
    done < <(LC_ALL=C grep -obUaP "${magic#*:}" "$bz" | cut -d: -f1)
  done
  rm -f "$out"
  return 1
}

# A tiny uncompressed initramfs: busybox + the modules the root filesystem
# needs, in dependency order (guest/initramfs-init loads them).
build_initramfs() {
  local kver="$1" out="$2" ir="$WORK/initramfs" bb m rel
  mkdir -p "$ir/bin" "$ir/dev" "$ir/proc" "$ir/sys" "$ir/root" "$ir/lib/modules"
  bb="$ROOT/usr/bin/busybox"
  [[ -x "$bb" ]] || bb="$ROOT/bin/busybox"
  [[ -x "$bb" ]] || e2e_die "busybox-static missing from the guest root"
  cp "$bb" "$ir/bin/busybox"
  install -m 0755 "$E2E_DIR/guest/initramfs-init" "$ir/init"
  mknod -m 600 "$ir/dev/console" c 5 1
  : >"$ir/modules.order"
  while read -r m; do
    rel="${m#"$ROOT/lib/modules/"}"
    grep -qxF "$rel" "$ir/modules.order" && continue
    mkdir -p "$ir/lib/modules/$(dirname "$rel")"
    cp "$m" "$ir/lib/modules/$rel"
    printf '%s\n' "$rel" >>"$ir/modules.order"
  done < <(modprobe -d "$ROOT" -S "$kver" --show-depends -a virtio_pci virtio_blk ext4 | awk '$1 == "insmod" { print $2 }')
  (cd "$ir" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$out"
}

configure_root() {
  local kver="$1" f
  install -m 0755 "$E2E_DIR/guest/init" "$ROOT/sbin/pillar-init"
  for f in ctld nfs-server; do
    install -m 0755 "$E2E_DIR/guest/$f" "$ROOT/usr/local/sbin/pillar-$f"
  done
  printf '%s\n' "$kver" >"$ROOT/etc/pillar-e2e-kernel"
  printf 'pillar-guest\n' >"$ROOT/etc/hostname"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOT/etc/hosts"
  printf '# root is mounted by the kernel (root=/dev/vda rw); pillar-init mounts the rest\n' >"$ROOT/etc/fstab"
  : >"$ROOT/etc/machine-id"
  # Per-guest identities are generated at every boot by pillar-init.
  rm -f "$ROOT/etc/nvme/hostnqn" "$ROOT/etc/nvme/hostid" "$ROOT/etc/iscsi/initiatorname.iscsi"
  mkdir -p "$ROOT/etc/nvme" "$ROOT/etc/iscsi"
  # NFS: serve v4 only (no rpcbind / statd needed for the tests); exports are
  # managed by whoever drives the guest (exportfs / /etc/exports.d).
  mkdir -p "$ROOT/etc/exports.d"
  : >"$ROOT/etc/exports"
}

cleanup_build() {
  local rc=$?
  if [[ -n "${CHROOT_PROC:-}" ]] && mountpoint -q "$CHROOT_PROC" 2>/dev/null; then
    umount -l "$CHROOT_PROC" || true
  fi
  [[ -n "${WORK:-}" && -d "$WORK" ]] && rm -rf "$WORK"
  exit "$rc"
}

main "$@"
