# shellcheck shell=bash
# Shared definitions for the e2e VM harness: kernel selection, image cache key.
# Sourced by build-image.sh and lib.sh.

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E_CACHE="${PILLAR_E2E_CACHE:-/var/cache/pillar-e2e}"

e2e_log() { printf '[e2e %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
e2e_die() { e2e_log "FATAL: $*"; exit 1; }

# The guest kernel is the one the host's linux-image-amd64 metapackage points
# at (NOT the running kernel of the session machine). PILLAR_E2E_KVER overrides.
e2e_kernel_version() {
  if [[ -n "${PILLAR_E2E_KVER:-}" ]]; then
    printf '%s\n' "$PILLAR_E2E_KVER"
    return
  fi
  local dep kver
  dep="$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null || true)"
  kver="$(sed -n 's/^linux-image-\([^ ,]*\).*/\1/p' <<<"$dep")"
  if [[ -z "$kver" || ! -e "/boot/vmlinuz-$kver" ]]; then
    # Fallback: newest /boot/vmlinuz-* that has modules installed.
    local v
    for v in $(find /boot -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sed 's/^vmlinuz-//' | sort -V); do
      [[ -d "/lib/modules/$v/kernel" ]] && kver="$v"
    done
  fi
  [[ -n "$kver" && -e "/boot/vmlinuz-$kver" && -e "/boot/initrd.img-$kver" && -d "/lib/modules/$kver" ]] ||
    e2e_die "no usable guest kernel in /boot (install linux-image-amd64: tests/e2e/deps.sh)"
  printf '%s\n' "$kver"
}

# Guest packages, comments stripped.
e2e_guest_packages() {
  sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$E2E_DIR/guest/packages.txt"
}

# Cache key: package list + kernel (ABI name and package version) + every file
# that shapes the image (this file, build-image.sh, nvme-auth-modules.sh,
# zfs-modules.sh, guest/*).
e2e_image_key() {
  local kver="$1"
  {
    e2e_guest_packages
    printf 'kernel %s %s\n' "$kver" "$(dpkg-query -W -f='${Version}' "linux-image-$kver" 2>/dev/null || echo unknown)"
    cat "$E2E_DIR/common.sh" "$E2E_DIR/build-image.sh" "$E2E_DIR/nvme-auth-modules.sh" \
      "$E2E_DIR/zfs-modules.sh"
    find "$E2E_DIR/guest" -type f -print0 | sort -z | xargs -0 cat
  } | sha256sum | cut -c1-16
}

e2e_image_path() {
  local kver="$1"
  printf '%s/pillar-root-%s-%s.raw\n' "$E2E_CACHE" "$kver" "$(e2e_image_key "$kver")"
}

# The initramfs built together with an image.
e2e_initrd_path() {
  printf '%s.initrd\n' "${1%.raw}"
}

# The uncompressed kernel extracted from /boot/vmlinuz (PVH boot), if any.
e2e_vmlinux_path() {
  printf '%s.vmlinux\n' "${1%.raw}"
}

# e2e_cache_publish STAGED OUT WORK WHAT T0: makes the finished build STAGED
# the cache entry OUT (atomically, by rename), drops WORK and every other
# entry of OUT's kind (named alike up to the kernel version), logs how long
# WHAT took since T0 ($SECONDS) and prints OUT.
e2e_cache_publish() {
  local staged="$1" out="$2" work="$3" what="$4" t0="$5" base="${2##*/}" kind f
  kind="${out%/*}/${base%%-[0-9]*}"
  : >"$staged/.done"
  rm -rf "$out"
  mv "$staged" "$out"
  rm -rf "$work"
  for f in "$kind"-[0-9]*; do
    [[ -d "$f" && "$f" != "$out" ]] && rm -rf "$f"
  done
  e2e_log "$what: $(find "$out" -name '*.ko' | wc -l) modules in $((SECONDS - t0)) s: $out"
  printf '%s\n' "$out"
}
