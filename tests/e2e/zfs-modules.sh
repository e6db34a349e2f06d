# shellcheck shell=bash
# The OpenZFS kernel modules for the guest kernel. Sourced by build-image.sh.
#
# Debian ships ZFS in `contrib` as source only (zfs-dkms); the guest image
# gets zfsutils-linux from contrib and, from here, the modules of the exact
# same ZFS version built against the guest kernel's own headers
# (linux-headers-<abi>). No dkms: its hooks build for the running kernel and
# install into the host's /lib/modules; here the source tree of the zfs-dkms
# package is configured and built out of tree, and nothing is installed on
# the host but the headers.
#
# zfs_modules KVER ZFS_VERSION MIRROR prints a directory holding the *.ko
# (spl, zfs and the parts zfs 2.1 splits out: zavl, icp, zcommon, zlua,
# znvpair, zunicode, zzstd), cached under $E2E_CACHE keyed by the kernel ABI
# and package version, the ZFS version and this file. Cold: configure about
# 3-5 min and make about 6-10 min on 2 cores; progress every 30 s.

# zfs__apt ARGS...: apt-get on a private list of MIRROR's contrib component
# (the host's apt configuration is left as it is).
zfs__apt() {
  local dir="$E2E_CACHE/zfs-apt"
  apt-get -q -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
    -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" \
    -o APT::Sandbox::User=root "$@"
}

# zfs__wait PID WHAT LOG: wait for PID, logging progress every 30 s.
zfs__wait() {
  local pid="$1" what="$2" log="$3" t0=$SECONDS n=0 rc=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    if ((n % 30 == 0)); then
      e2e_log "zfs modules: $what, $((SECONDS - t0)) s so far ($(tail -n 1 "$log" | cut -c1-100))"
    fi
  done
  wait "$pid" || rc=$?
  return "$rc"
}

zfs_modules() {
  local kver="$1" zver="$2" mirror="$3" pkgver key out work src t0=$SECONDS
  pkgver="$(dpkg-query -W -f='${Version}' "linux-image-$kver" 2>/dev/null || true)"
  [[ -n "$pkgver" ]] || e2e_die "zfs modules: linux-image-$kver is not installed"
  key="$( { printf '%s %s zfs %s\n' "$kver" "$pkgver" "$zver"; cat "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-12)"
  out="$E2E_CACHE/zfs-modules-$kver-${zver//[^A-Za-z0-9.]/_}-$key"
  if [[ -e "$out/.done" ]]; then
    printf '%s\n' "$out"
    return 0
  fi
  e2e_log "zfs modules: building OpenZFS $zver for linux $kver ($pkgver); cached in $out once built"
  if [[ "$(dpkg-query -W -f='${db:Status-Status} ${Version}' "linux-headers-$kver" 2>/dev/null || true)" != "installed $pkgver" ]]; then
    e2e_log "zfs modules: installing linux-headers-$kver=$pkgver"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "linux-headers-$kver=$pkgver" >"$E2E_CACHE/zfs-apt.log" 2>&1 ||
      {
        tail -n 20 "$E2E_CACHE/zfs-apt.log" >&2
        e2e_die "zfs modules: cannot install linux-headers-$kver=$pkgver"
      }
  fi
  local adir="$E2E_CACHE/zfs-apt"
  mkdir -p "$adir/lists/partial" "$adir/cache/archives/partial"
  printf 'deb %s bookworm contrib\n' "$mirror" >"$adir/sources.list"
  zfs__apt update >"$adir/update.log" 2>&1 ||
    { tail -n 20 "$adir/update.log" >&2; e2e_die "zfs modules: apt-get update of $mirror contrib failed"; }
  rm -rf "$E2E_CACHE"/zfs-build.*  # the leftovers of an interrupted build
  work="$(mktemp -d "$E2E_CACHE/zfs-build.XXXXXX")"
  (cd "$work" && zfs__apt download "zfs-dkms=$zver") >"$work/download.log" 2>&1 ||
    { tail -n 20 "$work/download.log" >&2; e2e_die "zfs modules: cannot download zfs-dkms=$zver"; }
  dpkg-deb -x "$work"/zfs-dkms_*.deb "$work/pkg"
  src="$(find "$work/pkg/usr/src" -mindepth 1 -maxdepth 1 -name 'zfs-*' -type d | head -n 1)"
  [[ -x "$src/configure" ]] || e2e_die "zfs modules: no configure script in the zfs-dkms package"
  e2e_log "zfs modules: configure (log: $work/configure.log)"
  (cd "$src" && exec ./configure --with-config=kernel \
    --with-linux="$(readlink -f "/lib/modules/$kver/source")" \
    --with-linux-obj="$(readlink -f "/lib/modules/$kver/build")") >"$work/configure.log" 2>&1 &
  zfs__wait $! configure "$work/configure.log" ||
    { tail -n 30 "$work/configure.log" >&2; e2e_die "zfs modules: configure failed"; }
  e2e_log "zfs modules: configured in $((SECONDS - t0)) s; make (log: $work/build.log)"
  make -C "$src/module" -j"$(nproc)" >"$work/build.log" 2>&1 &
  zfs__wait $! make "$work/build.log" ||
    { tail -n 30 "$work/build.log" >&2; e2e_die "zfs modules: the build failed"; }
  local staged="$work/out" ko
  mkdir -p "$staged"
  while read -r ko; do
    strip --strip-debug -o "$staged/$(basename "$ko")" "$ko"
  done < <(find "$src/module" -name '*.ko')
  [[ -s "$staged/zfs.ko" && -s "$staged/spl.ko" ]] || e2e_die "zfs modules: zfs.ko or spl.ko was not built"
  [[ "$(modinfo -F vermagic "$staged/zfs.ko")" == "$kver "* ]] ||
    e2e_die "zfs modules: zfs.ko is not built for $kver ($(modinfo -F vermagic "$staged/zfs.ko"))"
  printf 'OpenZFS %s (zfs-dkms from contrib) built for linux %s (%s)\n' "$zver" "$kver" "$pkgver" >"$staged/README"
  e2e_cache_publish "$staged" "$out" "$work" "zfs modules" "$t0"
}

# Puts the modules into the guest root ROOT, for the zfsutils-linux version
# installed there (from the base image's packages).
install_zfs_modules() {
  local kver="$1" root="$2" mirror="$3" zver mods dest
  zver="$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Version}' zfsutils-linux 2>/dev/null || true)"
  [[ -n "$zver" ]] || e2e_die "zfs modules: zfsutils-linux is not in the guest root (tests/e2e/guest/packages.txt)"
  mods="$(zfs_modules "$kver" "$zver" "$mirror")"
  dest="$root/lib/modules/$kver/updates/zfs"
  mkdir -p "$dest"
  cp "$mods"/*.ko "$dest/"
  cp "$mods/README" "$root/etc/pillar-e2e-zfs"
  # No pool is imported at boot from a cache file: the tests create and
  # import their pools themselves.
  rm -f "$root/etc/zfs/zpool.cache"
}
