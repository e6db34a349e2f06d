#!/usr/bin/env bash
# Builds pillar's container images as OCI archives, without a container
# engine: a Debian bookworm root made with debootstrap, assembled with umoci
# and written out with skopeo.
#
#   scripts/build-images.sh [--no-build] [COMPONENT...]   COMPONENT: agent controller node (default: all)
#   scripts/build-images.sh --install-deps                 only install what this and tests/images/test.sh need
#
# Output: ${PILLAR_BUILD_DIR:-build}/images/pillar-COMPONENT-PROJECTVERSION.oci.tar
# (oci-archive; its one tag is the full version with '+' as '-').
#
# Images:
#   pillar-agent       pillar-agent; lvm2, nfs-kernel-server, zfsutils-linux (contrib), ...; runs as root
#   pillar-controller  pillar-controller and pillarctl; ca-certificates; runs as 65532:65532
#   pillar-node        pillar-node; nvme-cli, open-iscsi, mkfs, mount, nfs-common, ...; runs as root
# Layer 1 is the component's Debian root: debootstrap --variant=minbase, the
# packages of the shared libraries its binaries load (found with ldd and
# dpkg -S on the built binaries, so the list is never stale) and the tools in
# images/packages-COMPONENT.txt. Roots are cached in
# ${PILLAR_IMAGES_CACHE:-/var/cache/pillar-images}, keyed by that package list
# (and ROOT_VERSION below); a cached root is reused as is. Layer 2 is
# /usr/local/bin with the binaries (debug info stripped).
# An archive whose inputs (root, binaries, metadata) have not changed is kept:
# a second run rebuilds nothing. Layers and config carry the commit's time,
# not the build's.
#
# Environment: PILLAR_BUILD_DIR, PILLAR_IMAGES_CACHE, PILLAR_IMAGES_MIRROR and
# PILLAR_IMAGES_SECURITY_MIRROR (default: the host's apt sources for bookworm
# and bookworm-security), PILLAR_IMAGE_SOURCE (the source label; default: the
# git remote "origin" without credentials, else "unknown").
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
SRC=$(pwd)
BUILD=${PILLAR_BUILD_DIR:-build}
CACHE=${PILLAR_IMAGES_CACHE:-/var/cache/pillar-images}
SUITE=bookworm
# Bump to rebuild every cached root (a change in how roots are made).
BASE_VERSION=1
ROOT_VERSION=2
CONTROLLER_UID=65532

COMPONENTS=(agent controller node)
declare -A BINARIES=(
  [agent]="pillar-agent"
  [controller]="pillar-controller pillarctl"
  [node]="pillar-node"
)
declare -A BUILD_PATH=(
  [pillar-agent]=src/agent/pillar-agent
  [pillar-controller]=src/controller/pillar-controller
  [pillarctl]=src/ctl/pillarctl
  [pillar-node]=src/node/pillar-node
)
declare -A ENTRYPOINT=(
  [agent]=/usr/local/bin/pillar-agent
  [controller]=/usr/local/bin/pillar-controller
  [node]=/usr/local/bin/pillar-node
)
# node and agent drive the kernel (configfs, mounts, LVM, modprobe): root,
# and privileged at run time. The controller needs no privilege.
declare -A IMAGE_USER=(
  [agent]=0:0
  [controller]=$CONTROLLER_UID:$CONTROLLER_UID
  [node]=0:0
)
# zfsutils-linux is in contrib (userland only: with --no-install-recommends
# no zfs-dkms, so no module build).
declare -A APT_COMPONENTS=(
  [agent]="main contrib"
  [controller]=main
  [node]=main
)
# What this script and tests/images/test.sh run.
HOST_PACKAGES=(debootstrap debian-archive-keyring umoci skopeo binutils jq util-linux coreutils)

log() { printf '[images %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() {
  log "FATAL: $*"
  exit 1
}

install_deps() {
  local -a missing
  # shellcheck disable=SC2016 # dpkg-query's ${Field} syntax
  mapfile -t missing < <(comm -23 <(printf '%s\n' "${HOST_PACKAGES[@]}" | sort -u) \
    <(dpkg-query -W -f='${db:Status-Status} ${Package}\n' | awk '$1 == "installed" { print $2 }' | sort -u))
  ((${#missing[@]} == 0)) && return 0
  [[ $EUID -eq 0 ]] || die "run as root to install ${missing[*]}"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The URI of the host's apt source for RELEASE (apt's own parser, any format).
host_repo() {
  # shellcheck disable=SC2016 # apt's own $(FIELD) syntax
  apt-get indextargets --format '$(TARGET_OF) $(RELEASE) $(REPO_URI)' |
    awk -v r="$1" '$1 == "deb" && $2 == r { print $3; exit }'
}

hash16() { sha256sum | cut -c1-16; }

# The tool packages of COMPONENT: images/packages-COMPONENT.txt without
# comments; every entry must be a Debian package name.
tool_packages() {
  local f="$SRC/images/packages-$1.txt" p
  [[ -r "$f" ]] || die "missing $f"
  while read -r p; do
    [[ "$p" =~ ^[a-z0-9][a-z0-9+.-]+$ ]] || die "$f: not a package name: $p"
    printf '%s\n' "$p"
  done < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$f")
}

# The packages of the shared libraries that BINARY... load directly (their
# DT_NEEDED entries, resolved by the host's loader); apt adds the rest. One
# dpkg-query for all of them; each library is looked up under its path and
# its real path, with and without /usr (dpkg knows one of them on a
# merged-/usr system).
runtime_packages() {
  local bin so path real line pkg c
  local -A where owner_of
  local -a libs=() cands=()
  for bin in "$@"; do
    where=()
    while read -r so path; do where[$so]=$path; done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
    while read -r so; do
      path=${where[$so]:-}
      [[ -n "$path" ]] || die "$bin: the loader does not find $so"
      real=$(readlink -f "$path")
      libs+=("$so $path $real")
      cands+=("$path" "$real" "/usr${path#/usr}" "${path#/usr}" "/usr${real#/usr}" "${real#/usr}")
    done < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
  done
  # "pkg[:arch][, pkg...]: path"; paths no package owns are left out.
  while IFS= read -r line; do
    [[ "$line" == diversion* ]] && continue
    pkg=${line%%: *} pkg=${pkg%%, *}
    owner_of[${line#*: }]=${pkg%%:*}
  done < <(dpkg-query -S "${cands[@]}" 2>/dev/null || true)
  for line in "${libs[@]}"; do
    read -r so path real <<<"$line"
    pkg=""
    for c in "$path" "$real" "/usr${path#/usr}" "${path#/usr}" "/usr${real#/usr}" "${real#/usr}"; do
      pkg=${owner_of[$c]:-}
      [[ -z "$pkg" ]] || break
    done
    [[ -n "$pkg" ]] || die "$so ($path) belongs to no Debian package"
    printf '%s\n' "$pkg"
  done | sort -u
}

# Stage 1: debootstrap --variant=minbase, cached (keyed by suite and mirror).
build_base() {
  local key base work t0=$SECONDS
  key=$(printf 'base v%s %s %s\n' "$BASE_VERSION" "$SUITE" "$MIRROR" | hash16)
  base="$CACHE/debootstrap-$key"
  if [[ -d "$base" ]]; then
    printf '%s\n' "$base"
    return 0
  fi
  work=$(mktemp -d "$CACHE/tmp.XXXXXX")
  log "debootstrap $SUITE (minbase) from $MIRROR: about a minute ..."
  if ! debootstrap --variant=minbase --components=main \
    --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$SUITE" "$work/root" "$MIRROR" >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2
    rm -rf "$work"
    die "debootstrap failed"
  fi
  mv "$work/root" "$base"
  rm -rf "$work"
  log "debootstrap done in $((SECONDS - t0)) s: $base"
  printf '%s\n' "$base"
}

# Removes what an image does not need and what belongs to the host or to the
# moment of the build: the identities that packages generate when installed
# (nvme-cli's hostnqn/hostid, open-iscsi's initiator name, zfs' hostid) would
# be shared by every node running the image; they come from the host at run
# time. Keeps /usr/share/doc/*/copyright and the dpkg database (scanners
# read it).
slim_root() {
  local r="${1:?}"
  [[ "$r" != / && -d "$r/var/lib/dpkg" ]] || die "slim_root: $r is not a Debian root"
  rm -f "$r/usr/sbin/policy-rc.d" "$r/etc/resolv.conf" "$r/etc/hostname" "$r/etc/hostid" \
    "$r/etc/nvme/hostnqn" "$r/etc/nvme/hostid" "$r/etc/iscsi/initiatorname.iscsi" \
    "$r/var/cache/ldconfig/aux-cache" "$r"/var/cache/debconf/*-old "$r"/var/lib/dpkg/*-old
  : >"$r/etc/machine-id"
  find "$r/usr/share/doc" -mindepth 1 ! -type d ! -type l ! -name copyright -delete
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$r/usr/share/man" "$r/usr/share/info" "$r/usr/share/locale" "$r/usr/share/lintian" \
    "${r:?}"/var/lib/apt/lists/* "${r:?}"/var/cache/apt/* "${r:?}"/dev/* "${r:?}"/tmp/* "${r:?}"/var/tmp/*
  find "$r/var/log" -type f -delete
  mkdir -p "$r/var/lib/apt/lists/partial" "$r/var/cache/apt/archives/partial"
}

# Stage 2: the component's root (base + packages, slimmed), cached, keyed by
# the package list. Prints its path.
build_root() {
  local c="$1" base="$2" key dir work r t0=$SECONDS
  shift 2
  local -a pkgs=("$@")
  key=$( {
    printf 'root v%s %s base %s components %s user %s\n' "$ROOT_VERSION" "$c" "$base" \
      "${APT_COMPONENTS[$c]}" "${IMAGE_USER[$c]}"
    printf '%s %s\n' "$MIRROR" "$SECURITY"
    printf '%s\n' "${pkgs[@]}"
  } | hash16)
  dir="$CACHE/root-$c-$key"
  if [[ -d "$dir" ]]; then
    log "$c: reusing cached root $dir"
    printf '%s\n' "$dir"
    return 0
  fi
  log "$c: building root: ${pkgs[*]}"
  work=$(mktemp -d "$CACHE/tmp.XXXXXX")
  r="$work/root"
  cp -a "$base" "$r"
  {
    printf 'deb %s %s %s\n' "$MIRROR" "$SUITE" "${APT_COMPONENTS[$c]}"
    printf 'deb %s %s-updates %s\n' "$MIRROR" "$SUITE" "${APT_COMPONENTS[$c]}"
    if [[ -n "$SECURITY" ]]; then printf 'deb %s %s-security %s\n' "$SECURITY" "$SUITE" "${APT_COMPONENTS[$c]}"; fi
  } >"$r/etc/apt/sources.list"
  # No service may start inside the chroot.
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
  chmod 755 "$r/usr/sbin/policy-rc.d"
  # /proc for the maintainer scripts, in a mount namespace of its own: it
  # disappears with the command, whatever happens.
  if ! unshare --fork --pid --mount-proc="$r/proc" \
    chroot "$r" env DEBIAN_FRONTEND=noninteractive LC_ALL=C PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" && apt-get clean' \
    apt-install "${pkgs[@]}" >"$work/apt.log" 2>&1; then
    tail -n 30 "$work/apt.log" >&2
    rm -rf "$work"
    die "$c: apt-get install in the root failed"
  fi
  if [[ "${IMAGE_USER[$c]}" != 0:0 ]]; then
    local uid=${IMAGE_USER[$c]%%:*}
    chroot "$r" useradd --uid "$uid" --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin -K UID_MAX=65535 -K GID_MAX=65535 pillar
    install -d -m 0755 "$r/var/lib/pillar-csi"
    install -d -m 0750 -o "$uid" -g "$uid" "$r/var/lib/pillar-csi/controller"
  fi
  slim_root "$r"
  # shellcheck disable=SC2016 # dpkg-query's ${Field} syntax
  chroot "$r" dpkg-query -W -f '${Package} ${Version}\n' >"$work/packages.txt"
  mv "$work/packages.txt" "$dir.packages"
  mv "$r" "$dir"
  rm -rf "$work"
  log "$c: root built in $((SECONDS - t0)) s ($(du -sh "$dir" | cut -f1), $(wc -l <"$dir.packages") packages): $dir"
  printf '%s\n' "$dir"
}

# Drops cached roots of COMPONENT other than KEEP (an older package list).
prune_roots() {
  local c="$1" keep="$2" d
  for d in "$CACHE/root-$c-"*; do
    [[ -d "$d" && "$d" != "$keep" ]] || continue
    log "$c: removing stale cached root $d"
    rm -rf "$d" "$d.packages"
  done
}

# The layer of pillar's files: /usr/local/bin with the binaries, debug info
# stripped, mtimes set to the commit's.
stage_binaries() {
  local c="$1" dir="$2" b
  install -d -m 0755 "$dir/usr" "$dir/usr/local" "$dir/usr/local/bin"
  for b in ${BINARIES[$c]}; do
    objcopy --strip-debug "$BUILD/${BUILD_PATH[$b]}" "$dir/usr/local/bin/$b"
    chmod 0755 "$dir/usr/local/bin/$b"
  done
  find "$dir" -exec touch -h -d "@$EPOCH" {} +
}

assemble() {
  local c="$1" root="$2" archive="$OUT/pillar-$1-$PROJECT_VERSION.oci.tar" key work t0=$SECONDS b
  local title="pillar-$c" created
  created=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  key=$( {
    printf 'image v1 %s root %s tag %s user %s entrypoint %s created %s\n' "$c" "$root" "$TAG" \
      "${IMAGE_USER[$c]}" "${ENTRYPOINT[$c]}" "$created"
    printf 'labels %s %s %s %s\n' "$title" "$VERSION" "$REVISION" "$SOURCE"
    for b in ${BINARIES[$c]}; do sha256sum <"$BUILD/${BUILD_PATH[$b]}"; done
  } | hash16)
  if [[ -s "$archive" && "$(cat "$archive.key" 2>/dev/null || true)" == "$key" ]]; then
    log "$c: $archive is up to date"
    return 0
  fi
  log "$c: assembling $title:$TAG"
  work=$(mktemp -d "$OUT/.work-$c.XXXXXX")
  mkdir "$work/bin"
  stage_binaries "$c" "$work/bin"
  local img="$work/layout:$TAG"
  umoci init --layout "$work/layout"
  umoci new --image "$img"
  log "$c: layer 1: the Debian root ($(du -sh "$root" | cut -f1))"
  umoci insert --image "$img" --history.created "$created" \
    --history.created_by "scripts/build-images.sh: debootstrap $SUITE minbase + $(basename "$root")" \
    "$root" /
  log "$c: layer 2: /usr/local/bin (${BINARIES[$c]})"
  umoci insert --image "$img" --history.created "$created" \
    --history.created_by "scripts/build-images.sh: ${BINARIES[$c]}" "$work/bin/usr/local/bin" /usr/local/bin
  local -a cfg=(
    --architecture amd64 --os linux --created "$created" --author pillar
    --config.entrypoint "${ENTRYPOINT[$c]}" --config.user "${IMAGE_USER[$c]}" --config.workingdir /
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    --config.label "org.opencontainers.image.title=$title"
    --config.label "org.opencontainers.image.version=$VERSION"
    --config.label "org.opencontainers.image.revision=$REVISION"
    --config.label "org.opencontainers.image.source=$SOURCE"
    --no-history
  )
  umoci config --image "$img" "${cfg[@]}"
  umoci gc --layout "$work/layout"
  rm -f "$work/out.tar"
  skopeo copy --quiet "oci:$img" "oci-archive:$work/out.tar:$TAG"
  mv "$work/out.tar" "$archive"
  printf '%s\n' "$key" >"$archive.key"
  rm -rf "$work"
  # Archives of other versions of this component.
  for b in "$OUT/pillar-$c-"*.oci.tar; do
    [[ "$b" == "$archive" || ! -e "$b" ]] || rm -f "$b" "$b.key"
  done
  log "$c: $archive assembled in $((SECONDS - t0)) s"
}

main() {
  local do_build=1 c
  local -a want=()
  while (($#)); do
    case "$1" in
      --install-deps)
        install_deps
        return 0
        ;;
      --no-build) do_build=0 ;;
      agent | controller | node) want+=("$1") ;;
      *) die "unknown argument: $1 (usage: $0 [--no-build] [agent|controller|node]... | --install-deps)" ;;
    esac
    shift
  done
  ((${#want[@]})) || want=("${COMPONENTS[@]}")
  [[ $EUID -eq 0 ]] || die "run as root (debootstrap, chroot)"
  local t0=$SECONDS
  install_deps
  if ((do_build)); then
    log "building pillar into $BUILD (scripts/build.sh)"
    PILLAR_BUILD_DIR="$BUILD" ./scripts/build.sh
  fi
  for c in "${want[@]}"; do
    for b in ${BINARIES[$c]}; do
      [[ -x "$BUILD/${BUILD_PATH[$b]}" ]] || die "$BUILD/${BUILD_PATH[$b]} is not built"
    done
  done

  # Version and labels: what the binaries say, and the commit they say it of.
  local line
  line=$("$BUILD/src/controller/pillar-controller" --version)
  [[ "$line" =~ ^pillar-controller\ (([0-9]+\.[0-9]+\.[0-9]+)(\+g([0-9a-f]{7})(\.dirty)?)?)$ ]] ||
    die "unexpected pillar-controller --version: $line"
  VERSION=${BASH_REMATCH[1]} PROJECT_VERSION=${BASH_REMATCH[2]}
  local short=${BASH_REMATCH[4]}
  TAG=${VERSION//+/-}
  REVISION=unknown
  EPOCH=0
  if [[ -n "$short" ]]; then
    REVISION=$(git rev-parse --verify -q "$short^{commit}") || die "the binaries name commit $short, which git does not know"
    EPOCH=$(git log -1 --format=%ct "$REVISION")
  fi
  SOURCE=${PILLAR_IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null | sed -E 's#^([a-z+]+://)[^/@]*@#\1#' || true)}
  SOURCE=${SOURCE:-unknown}
  [[ "$SOURCE" =~ ^[A-Za-z0-9:/._@+~-]+$ ]] || die "PILLAR_IMAGE_SOURCE: unexpected characters: $SOURCE"
  log "version $VERSION, revision $REVISION, source $SOURCE"

  MIRROR=${PILLAR_IMAGES_MIRROR:-$(host_repo "$SUITE" || true)}
  [[ -n "$MIRROR" ]] || die "no apt source for $SUITE found on this host; set PILLAR_IMAGES_MIRROR"
  SECURITY=${PILLAR_IMAGES_SECURITY_MIRROR:-$(host_repo "$SUITE-security" || true)}

  mkdir -p "$CACHE" "$BUILD/images"
  OUT=$(cd "$BUILD/images" && pwd)
  BUILD=$(cd "$BUILD" && pwd)
  # One builder at a time per cache and per output directory.
  exec {cache_lock}>"$CACHE/.lock"
  flock "$cache_lock"
  exec {out_lock}>"$OUT/.lock"
  flock "$out_lock"
  rm -rf "$CACHE"/tmp.* "$OUT"/.work-*

  local base root
  base=$(build_base)
  for c in "${want[@]}"; do
    local -a bins=() pkgs=()
    local list
    for b in ${BINARIES[$c]}; do bins+=("$BUILD/${BUILD_PATH[$b]}"); done
    list=$(runtime_packages "${bins[@]}")
    list+=$'\n'$(tool_packages "$c")
    list=$(sort -u <<<"$list")
    mapfile -t pkgs <<<"$list"
    root=$(build_root "$c" "$base" "${pkgs[@]}")
    prune_roots "$c" "$root"
    assemble "$c" "$root"
  done

  log "done in $((SECONDS - t0)) s"
  for c in "${want[@]}"; do
    local a="$OUT/pillar-$c-$PROJECT_VERSION.oci.tar"
    printf 'image pillar-%s:%s  %s  %s\n' "$c" "$TAG" "$(du -h --apparent-size "$a" | cut -f1)" "$a"
  done
}

main "$@"
