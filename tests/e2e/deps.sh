#!/usr/bin/env bash
# Install the host-side packages the real-kernel VM harness needs (Debian 12).
# Safe to run repeatedly: only missing packages are installed.
set -euo pipefail

PILLAR_E2E_HOST_PKGS=(
  qemu-system-x86      # qemu-system-x86_64 (TCG)
  qemu-utils           # qemu-img (per-guest qcow2 overlays)
  debootstrap          # guest root image
  debian-archive-keyring
  linux-image-amd64    # the guest kernel + modules (booted with -kernel/-initrd)
  e2fsprogs            # mkfs.ext4 -d (image without loop mounts)
  xz-utils cpio        # kernel extraction (PVH boot), initramfs
  make gcc binutils    # the guest's nvme modules with in-band auth (nvme-auth-modules.sh)
  libc6-dev file       # the guest's zfs modules (zfs-modules.sh: OpenZFS's configure)
  iproute2             # ss (free loopback UDP ports)
  coreutils util-linux procps
)

e2e_deps_missing() {
  local p missing=()
  for p in "${PILLAR_E2E_HOST_PKGS[@]}"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != installed ]]; then
      missing+=("$p")
    fi
  done
  printf '%s\n' "${missing[@]}"
}

e2e_deps_install() {
  local missing
  mapfile -t missing < <(e2e_deps_missing)
  [[ ${#missing[@]} -eq 0 || -z "${missing[0]}" ]] && return 0
  echo "e2e deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  e2e_deps_install
fi
