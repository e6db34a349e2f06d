#!/usr/bin/env bash
# Builds the Kubernetes test tools (kube-apiserver, kube-controller-manager,
# kubectl, etcd) from the Go module in tests/k8s/tools into a cache outside the
# work tree, keyed by version. Binaries already in the cache are not rebuilt.
#
# usage: build-tools.sh                 build what is missing; last stdout line = bin dir
#        build-tools.sh --print-bindir  print the bin dir and exit (builds nothing)
#        build-tools.sh --check         exit 0 if every binary is cached, 1 otherwise
#
# env:   PILLAR_K8S_TOOLS_CACHE  cache root (default /var/cache/pillar-k8s-tools)
#        GO                      go command (default: go in PATH, else /usr/local/go/bin/go)
#
# Progress goes to stderr; stdout carries only the bin dir, so
#   K8S_BIN=$(tests/k8s/build-tools.sh)
# works.
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
moddir=$here/tools
cache_root=${PILLAR_K8S_TOOLS_CACHE:-/var/cache/pillar-k8s-tools}
bindir=$cache_root/k8s-$K8S_VERSION-etcd-$ETCD_VERSION/bin

# name:package, smallest first so a short run still leaves something useful.
tools=(
  "etcd:./cmd/etcd"
  "kubectl:k8s.io/kubernetes/cmd/kubectl"
  "kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver"
)

log() { printf 'build-tools: %s\n' "$*" >&2; }

all_present() {
  local t
  for t in "${tools[@]}"; do
    [[ -x $bindir/${t%%:*} ]] || return 1
  done
}

case ${1:-} in
  --print-bindir) echo "$bindir"; exit 0 ;;
  --check) all_present; exit ;;
  "") ;;
  *) echo "usage: $0 [--print-bindir|--check]" >&2; exit 2 ;;
esac

if all_present; then
  log "all tools present in $bindir, nothing to build"
  echo "$bindir"
  exit 0
fi

# The cache key must say what go.mod really builds.
grep -Eq "^[[:space:]]*k8s\.io/kubernetes $K8S_VERSION( |$)" "$moddir/go.mod" ||
  { log "tools/go.mod does not require k8s.io/kubernetes $K8S_VERSION; fix K8S_VERSION"; exit 1; }
grep -Eq "^[[:space:]]*(require )?go\.etcd\.io/etcd/server/v3 $ETCD_VERSION( |$)" "$moddir/go.mod" ||
  { log "tools/go.mod does not require etcd server $ETCD_VERSION; fix ETCD_VERSION"; exit 1; }

if [[ -n ${GO:-} ]]; then go_cmd=$GO
elif command -v go >/dev/null; then go_cmd=$(command -v go)
else go_cmd=/usr/local/go/bin/go
fi
[[ -x $go_cmd ]] || { log "no go command (set GO=...)"; exit 1; }

mkdir -p "$bindir"

# One builder at a time per cache entry; a second caller waits, then finds
# the binaries present.
exec 9>"$bindir/.lock"
if ! flock -n 9; then
  log "another build-tools.sh is building into $bindir, waiting for it"
  flock 9
fi

# A build killed outright leaves only a .NAME.tmp.PID file, never NAME; sweep those.
rm -f "$bindir"/.*.tmp.*

tmp="" bpid=""
cleanup() {
  # The go build runs in its own process group (setsid) so an interrupt stops
  # the compilers too, at once, not after the build.
  if [[ -n $bpid ]]; then kill -TERM -- "-$bpid" 2>/dev/null || kill -TERM "$bpid" 2>/dev/null; wait "$bpid" 2>/dev/null; fi
  [[ -z $tmp ]] || rm -f "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
setsid=()
command -v setsid >/dev/null && setsid=(setsid -w)

# Version stamps the upstream release build would set; without them the
# binaries report v0.0.0-master.
kver=(-X "k8s.io/component-base/version.gitVersion=$K8S_VERSION"
      -X "k8s.io/component-base/version.gitMajor=1"
      -X "k8s.io/component-base/version.gitMinor=37"
      -X "k8s.io/component-base/version.gitTreeState=clean"
      -X "k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
      -X "k8s.io/client-go/pkg/version.gitMajor=1"
      -X "k8s.io/client-go/pkg/version.gitMinor=37"
      -X "k8s.io/client-go/pkg/version.gitTreeState=clean")

export CGO_ENABLED=0
# go.sum is committed; readonly means a fresh machine needs only the module proxy
# and a build never edits go.mod.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"

"$go_cmd" version >&2
for t in "${tools[@]}"; do
  name=${t%%:*} pkg=${t#*:}
  if [[ -x $bindir/$name ]]; then
    log "$name present"
    continue
  fi
  case $name in
    etcd) ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION-pillar-tools" ;;
    *) ldflags="-s -w ${kver[*]}" ;;
  esac
  case $name in
    kube-apiserver|kube-controller-manager) log "building $name (takes several minutes on 2 cores)…" ;;
    *) log "building $name…" ;;
  esac
  tmp=$bindir/.$name.tmp.$$
  start=$(date +%s)
  (cd "$moddir" && exec "${setsid[@]}" nice -n 10 "$go_cmd" build -trimpath -ldflags="$ldflags" -o "$tmp" "$pkg") &
  bpid=$!
  wait "$bpid" || { rc=$?; bpid=""; log "building $name failed (exit $rc)"; exit 1; }
  bpid=""
  mv -f "$tmp" "$bindir/$name"
  tmp=""
  log "built $name in $(( $(date +%s) - start )) s"
done

all_present || { log "some tools are still missing in $bindir"; exit 1; }
echo "$bindir"
