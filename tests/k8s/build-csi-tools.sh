#!/usr/bin/env bash
# Builds the Kubernetes CSI sidecars (csi-provisioner, csi-attacher,
# csi-resizer, csi-snapshotter), snapshot-controller (the cluster-wide half of
# snapshots, from csi-snapshotter's module and release) and helm, each from
# its own Go module in tests/k8s/csi-tools/<dir>/, into a cache outside the
# work tree keyed by their versions. Same interface as build-tools.sh; cached
# binaries are not rebuilt.
#
# usage: build-csi-tools.sh                 build what is missing; last stdout line = bin dir
#        build-csi-tools.sh NAME...         build only these (when missing), e.g. helm
#        build-csi-tools.sh --print-bindir  print the bin dir and exit (builds nothing)
#        build-csi-tools.sh --check         exit 0 if every binary is cached, 1 otherwise
#
# env:   PILLAR_K8S_TOOLS_CACHE  cache root (default /var/cache/pillar-k8s-tools)
#        GO                      go command (default: go in PATH, else /usr/local/go/bin/go)
#
# Every module says `go 1.26.0`; Go 1.26.8 builds them, GOTOOLCHAIN is left alone.
# Progress goes to stderr, so CSI_BIN=$(tests/k8s/build-csi-tools.sh) works.
set -euo pipefail

# One row per tool: binary, key letter, module it is built from, version,
# package within that module, the variable upstream's release build stamps
# with the version (-X) and, when it is not the binary's name, the directory
# of the Go module under csi-tools/. Smallest first. The cache key is made of
# the distinct letters and versions, so changing any version here changes the
# bin dir (two binaries of one module and release share a letter).
rows=(
  "csi-resizer     r github.com/kubernetes-csi/external-resizer/v2    v2.3.0  cmd/csi-resizer     main.version"
  "csi-attacher    a github.com/kubernetes-csi/external-attacher/v4   v4.13.0 cmd/csi-attacher    main.version"
  "csi-snapshotter s github.com/kubernetes-csi/external-snapshotter/v8 v8.7.0 cmd/csi-snapshotter main.version"
  "snapshot-controller s github.com/kubernetes-csi/external-snapshotter/v8 v8.7.0 cmd/snapshot-controller main.version csi-snapshotter"
  "csi-provisioner p github.com/kubernetes-csi/external-provisioner/v6 v6.4.0 cmd/csi-provisioner main.version"
  "helm            h helm.sh/helm/v4                                  v4.3.2  cmd/helm            helm.sh/helm/v4/internal/version.version"
)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
key=csi
for r in "${rows[@]}"; do
  read -r _ letter _ ver _ <<<"$r"
  [[ $key == *"-$letter${ver#v}"* ]] || key+=-$letter${ver#v}
done
bindir=${PILLAR_K8S_TOOLS_CACHE:-/var/cache/pillar-k8s-tools}/$key/bin

say() { printf 'build-csi-tools: %s\n' "$*" >&2; }
wanted() { # the rows asked for (all when no name was given)
  local r name n
  for r in "${rows[@]}"; do
    read -r name _ <<<"$r"
    if [[ ${#only[@]} -eq 0 ]]; then echo "$r"; continue; fi
    for n in "${only[@]}"; do [[ $n != "$name" ]] || echo "$r"; done
  done
}
missing() { # prints the wanted binaries not yet in the cache
  local r name
  while read -r r; do
    read -r name _ <<<"$r"
    [[ -x $bindir/$name ]] || echo "$name"
  done < <(wanted)
}

only=()
case ${1:-build} in
  build) ;;
  --print-bindir) echo "$bindir"; exit 0 ;;
  --check) [[ -z $(missing) ]]; exit ;;
  --*) echo "usage: $0 [--print-bindir|--check|NAME...]" >&2; exit 2 ;;
  *) only=("$@") ;;
esac
for n in "${only[@]}"; do
  printf '%s\n' "${rows[@]}" | grep -q "^$n " || { say "no binary named $n"; exit 2; }
done

if [[ -z $(missing) ]]; then
  say "all present in $bindir"
  echo "$bindir"
  exit 0
fi

# The key must describe what the modules really build: each go.mod must
# require exactly the version in its row.
for r in "${rows[@]}"; do
  read -r name _ mod ver _ _ dir <<<"$r"
  dir=${dir:-$name}
  awk -v m="$mod" -v v="$ver" '($1 == "require" && $2 == m && $3 == v) || ($1 == m && $2 == v) { ok = 1 }
      END { exit !ok }' "$here/csi-tools/$dir/go.mod" ||
    { say "csi-tools/$dir/go.mod does not require $mod $ver; update the row in $0"; exit 1; }
done

go_cmd=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[[ -x $go_cmd ]] || { say "no go command (set GO=...)"; exit 1; }

mkdir -p "$bindir"
# A concurrent caller waits for the first one, then finds the binaries there.
exec 8>"$bindir/.lock"
flock -n 8 || { say "another build is running into $bindir, waiting"; flock 8; }
rm -f "$bindir"/.*.part.*   # left by a build that was killed outright

part="" job=""
on_exit() {
  # go build runs in its own process group, so stopping it stops the compilers.
  [[ -z $job ]] || { kill -TERM -- "-$job" 2>/dev/null || kill -TERM "$job" 2>/dev/null; wait "$job" 2>/dev/null; }
  [[ -z $part ]] || rm -f "$part"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
detach=()
if command -v setsid >/dev/null; then detach=(setsid -w); fi

# CGO off, -mod=readonly against the committed go.sum: a fresh machine needs
# only the module proxy, and a build never rewrites a go.mod.
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"
"$go_cmd" version >&2
while read -r r; do
  read -r name _ mod ver pkg stamp dir <<<"$r"
  dir=${dir:-$name}
  if [[ -x $bindir/$name ]]; then say "$name $ver present"; continue; fi
  flags="-s -w -X $stamp=$ver"
  [[ $name != helm ]] || flags+=" -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  say "building $name $ver…"
  part=$bindir/.$name.part.$$
  t0=$SECONDS
  (cd "$here/csi-tools/$dir" &&
    exec "${detach[@]}" nice -n 10 "$go_cmd" build -trimpath -ldflags="$flags" -o "$part" "$mod/$pkg") &
  job=$!
  if ! wait "$job"; then job=""; say "building $name failed"; exit 1; fi
  job=""
  mv -f "$part" "$bindir/$name"
  part=""
  say "built $name $ver in $((SECONDS - t0)) s"
done < <(wanted)

[[ -z $(missing) ]] || { say "still missing in $bindir: $(missing | tr '\n' ' ')"; exit 1; }
echo "$bindir"
