# shellcheck shell=bash
# The guest kernel's NVMe modules with in-band authentication turned on.
# Sourced by build-image.sh.
#
# Debian 12's kernel is built without CONFIG_NVME_AUTH (host) and
# CONFIG_NVME_TARGET_AUTH (nvmet), so DH-HMAC-CHAP cannot be exercised on it
# as shipped. Both options only add code to modules (nvme-core, nvmet) and
# pull in nvme-common, so we rebuild drivers/nvme, and nothing else, from
# Debian's own source of the exact same kernel package version
# (linux-source-<series>), against its own headers (linux-headers-<abi>): the
# same vermagic, the same symbol versions, the stock kernel image, and every
# other module as shipped. The modules are unsigned; the guests do not boot
# with lockdown, so the kernel loads them (and logs a taint).
#
# nvme_auth_modules KVER prints a directory holding common/, host/ and
# target/ *.ko, cached under $E2E_CACHE keyed by the kernel ABI and package
# version and this file. The build itself takes about 20 s on 2 cores; the
# packages about 15 s; unpacking drivers/nvme from the source tarball 10 s.

nvme_auth_modules() {
  local kver="$1" pkgver series key out work src t0=$SECONDS
  pkgver="$(dpkg-query -W -f='${Version}' "linux-image-$kver" 2>/dev/null || true)"
  [[ -n "$pkgver" ]] || e2e_die "nvme auth modules: linux-image-$kver is not installed"
  series="$(sed -n 's/^\([0-9]*\.[0-9]*\)\..*/\1/p' <<<"$kver")"
  key="$( { printf '%s %s\n' "$kver" "$pkgver"; cat "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-12)"
  out="$E2E_CACHE/nvme-auth-$kver-$key"
  if [[ -e "$out/.done" ]]; then
    printf '%s\n' "$out"
    return 0
  fi
  e2e_log "nvme auth modules: building drivers/nvme of linux $kver ($pkgver) with CONFIG_NVME_AUTH and CONFIG_NVME_TARGET_AUTH"
  local -a need=()
  local p
  for p in "linux-headers-$kver" "linux-source-$series"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$p" 2>/dev/null || true)" != "installed $pkgver" ]]; then
      need+=("$p=$pkgver")
    fi
  done
  if ((${#need[@]})); then
    e2e_log "nvme auth modules: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
      >"$E2E_CACHE/nvme-auth-apt.log" 2>&1 ||
      {
        tail -n 20 "$E2E_CACHE/nvme-auth-apt.log" >&2
        e2e_die "nvme auth modules: cannot install ${need[*]} (the source of the guest kernel's exact version)"
      }
  fi
  rm -rf "$E2E_CACHE"/nvme-auth.*  # the leftovers of an interrupted build
  local tarball="/usr/src/linux-source-$series.tar.xz"
  [[ -s "$tarball" ]] || e2e_die "nvme auth modules: $tarball is missing"
  work="$(mktemp -d "$E2E_CACHE/nvme-auth.XXXXXX")"
  e2e_log "nvme auth modules: unpacking drivers/nvme from $tarball"
  tar -C "$work" -xJf "$tarball" "linux-source-$series/drivers/nvme" ||
    e2e_die "nvme auth modules: drivers/nvme is not in $tarball"
  src="$work/linux-source-$series/drivers/nvme"
  e2e_log "nvme auth modules: make (log: $work/build.log)"
  # The Makefiles read the options as make variables, the C code as
  # preprocessor symbols (autoconf.h of the stock build lacks them).
  if ! make -C "/usr/src/linux-headers-$kver" M="$src" -j"$(nproc)" modules \
    CONFIG_NVME_COMMON=m CONFIG_NVME_AUTH=y CONFIG_NVME_TARGET_AUTH=y \
    KCFLAGS="-DCONFIG_NVME_COMMON_MODULE=1 -DCONFIG_NVME_AUTH=1 -DCONFIG_NVME_TARGET_AUTH=1" \
    >"$work/build.log" 2>&1; then
    tail -n 30 "$work/build.log" >&2
    e2e_die "nvme auth modules: the build failed"
  fi
  # The authentication code must really be in: nvmet's host attributes and
  # the host's negotiation (nm's output is read whole: grep -q would close
  # the pipe early and pipefail would call that a failure).
  local syms
  syms="$(nm "$src/target/nvmet.ko")"
  [[ $'\n'"$syms"$'\n' == *" T nvmet_setup_auth"$'\n'* ]] ||
    e2e_die "nvme auth modules: nvmet.ko was built without CONFIG_NVME_TARGET_AUTH"
  syms="$(nm "$src/host/nvme-core.ko")"
  [[ $'\n'"$syms"$'\n' == *" T nvme_auth_negotiate"$'\n'* ]] ||
    e2e_die "nvme auth modules: nvme-core.ko was built without CONFIG_NVME_AUTH"
  local staged="$work/out" ko rel
  while read -r ko; do
    rel="${ko#"$src/"}"
    mkdir -p "$staged/$(dirname "$rel")"
    strip --strip-debug -o "$staged/$rel" "$ko"
  done < <(find "$src" -name '*.ko')
  printf 'linux %s (%s): drivers/nvme rebuilt from linux-source-%s with CONFIG_NVME_AUTH=y CONFIG_NVME_TARGET_AUTH=y\n' \
    "$kver" "$pkgver" "$series" >"$staged/README"
  e2e_cache_publish "$staged" "$out" "$work" "nvme auth modules" "$t0"
}

# Replaces the guest root's stock drivers/nvme modules with the ones above.
install_nvme_auth_modules() {
  local kver="$1" root="$2" mods ko rel dest
  mods="$(nvme_auth_modules "$kver")"
  dest="$root/lib/modules/$kver/kernel/drivers/nvme"
  while read -r ko; do
    rel="${ko#"$mods/"}"
    mkdir -p "$dest/$(dirname "$rel")"
    rm -f "$dest/$rel" "$dest/$rel".*
    cp "$ko" "$dest/$rel"
  done < <(find "$mods" -name '*.ko')
  cp "$mods/README" "$root/etc/pillar-e2e-nvme-auth"
}
