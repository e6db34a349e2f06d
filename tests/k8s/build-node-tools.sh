#!/usr/bin/env bash
# Builds what a kubelet node and the cluster test need, each from its Go
# module, into a cache outside the work tree keyed by the versions:
#   containerd, containerd-shim-runc-v2, ctr  (tests/k8s/node-tools/containerd)
#   runc                                      (tests/k8s/node-tools/runc, cgo + libseccomp)
#   bridge, host-local, loopback, portmap     (tests/k8s/node-tools/cni)
#   kubelet, kube-scheduler, e2e.test         (tests/k8s/tools: the module and k8s.io pins
#                                              of kube-apiserver, so packages compile once)
# Same interface as build-tools.sh; cached binaries are not rebuilt.
#
# usage: build-node-tools.sh                 build what is missing; last stdout line = bin dir
#        build-node-tools.sh --print-bindir  print the bin dir and exit (builds nothing)
#        build-node-tools.sh --check         exit 0 if every binary is cached, 1 otherwise
#        build-node-tools.sh NAME...         build only these binaries (when missing)
#
# env:   PILLAR_K8S_TOOLS_CACHE  cache root (default /var/cache/pillar-k8s-tools)
#        GO                      go command (default: go in PATH, else /usr/local/go/bin/go)
set -euo pipefail

K8S_VERSION=v1.37.2
CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.5.3
CNI_VERSION=v1.10.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${PILLAR_K8S_TOOLS_CACHE:-/var/cache/pillar-k8s-tools}
key=node-k${K8S_VERSION#v}-c${CONTAINERD_VERSION#v}-r${RUNC_VERSION#v}-n${CNI_VERSION#v}
bindir=$cache_root/$key/bin

# One row per binary: name, module dir (under tests/k8s), how to build, package.
# Smallest first, so a short run still leaves something useful.
rows=(
  "loopback                node-tools/cni        plain github.com/containernetworking/plugins/plugins/main/loopback"
  "host-local              node-tools/cni        plain github.com/containernetworking/plugins/plugins/ipam/host-local"
  "bridge                  node-tools/cni        plain github.com/containernetworking/plugins/plugins/main/bridge"
  "portmap                 node-tools/cni        plain github.com/containernetworking/plugins/plugins/meta/portmap"
  "runc                    node-tools/runc       runc  github.com/opencontainers/runc"
  "ctr                     node-tools/containerd ctrd  github.com/containerd/containerd/v2/cmd/ctr"
  "containerd-shim-runc-v2 node-tools/containerd ctrd  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
  "containerd              node-tools/containerd ctrd  github.com/containerd/containerd/v2/cmd/containerd"
  "kubelet                 tools                 kube  k8s.io/kubernetes/cmd/kubelet"
  "kube-scheduler          tools                 kube  k8s.io/kubernetes/cmd/kube-scheduler"
  "e2e.test                tools                 e2e   ./cmd/e2e"
)

say() { printf 'build-node-tools: %s\n' "$*" >&2; }
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
case ${1:-} in
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

# The key must say what the modules really build.
need_version() { # module-dir module version
  awk -v m="$2" -v v="$3" '($1 == "require" && $2 == m && $3 == v) || ($1 == m && $2 == v) { ok = 1 }
      END { exit !ok }' "$here/$1/go.mod" ||
    { say "$1/go.mod does not require $2 $3; fix the version in $0"; exit 1; }
}
need_version node-tools/containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION"
need_version node-tools/runc github.com/opencontainers/runc "$RUNC_VERSION"
need_version node-tools/cni github.com/containernetworking/plugins "$CNI_VERSION"
need_version tools k8s.io/kubernetes "$K8S_VERSION"

go_cmd=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[[ -x $go_cmd ]] || { say "no go command (set GO=...)"; exit 1; }

# runc is built with cgo against libseccomp: its headers and pkg-config file
# come from Debian (a fresh machine has neither).
if missing | grep -qx runc && ! pkg-config --exists libseccomp 2>/dev/null; then
  [[ $(id -u) -eq 0 ]] || { say "runc needs libseccomp-dev and pkg-config: install them (as root)"; exit 1; }
  say "installing libseccomp-dev and pkg-config (runc's seccomp)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libseccomp-dev pkg-config >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libseccomp-dev pkg-config >/dev/null; } ||
    { say "could not install libseccomp-dev"; exit 1; }
fi

mkdir -p "$bindir"
exec 7>"$bindir/.lock"
flock -n 7 || { say "another build is running into $bindir, waiting"; flock 7; }
rm -f "$bindir"/.*.part.*   # left by a build that was killed outright

part="" job=""
on_exit() {
  # go runs in its own process group, so stopping it stops the compilers.
  [[ -z $job ]] || { kill -TERM -- "-$job" 2>/dev/null || kill -TERM "$job" 2>/dev/null; wait "$job" 2>/dev/null; }
  [[ -z $part ]] || rm -f "$part"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
detach=()
if command -v setsid >/dev/null; then detach=(setsid -w); fi

kver=(-X "k8s.io/component-base/version.gitVersion=$K8S_VERSION"
      -X "k8s.io/component-base/version.gitMajor=1"
      -X "k8s.io/component-base/version.gitMinor=37"
      -X "k8s.io/component-base/version.gitTreeState=clean"
      -X "k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
      -X "k8s.io/client-go/pkg/version.gitMajor=1"
      -X "k8s.io/client-go/pkg/version.gitMinor=37"
      -X "k8s.io/client-go/pkg/version.gitTreeState=clean")

# -mod=readonly against the committed go.sum: a fresh machine needs only the
# module proxy, and a build never rewrites a go.mod.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"
"$go_cmd" version >&2
while read -r r; do
  read -r name dir how pkg <<<"$r"
  if [[ -x $bindir/$name ]]; then say "$name present"; continue; fi
  part=$bindir/.$name.part.$$
  cmd=(build -trimpath)
  env=(CGO_ENABLED=0)
  case $how in
    plain) cmd+=(-ldflags="-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_VERSION") ;;
    ctrd) cmd+=(-tags "no_btrfs no_devmapper no_zfs urfave_cli_no_docs"
                -ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION") ;;
    # Static with libseccomp (libseccomp-dev); without upstream's libpathrs
    # tag, which needs a Rust C library Debian does not have.
    runc) env=(CGO_ENABLED=1)
          cmd+=(-buildmode=pie -tags "seccomp urfave_cli_no_docs netgo osusergo"
                -ldflags="-s -w -X main.version=${RUNC_VERSION#v} -extldflags -static-pie") ;;
    kube) cmd+=(-ldflags="-s -w ${kver[*]}") ;;
    e2e) cmd=(test -c -trimpath -ldflags="-s -w ${kver[*]}") ;;
  esac
  case $name in
    kubelet|e2e.test) say "building $name (cold: ~10 min for kubelet, ~17 for e2e.test on 2 idle cores; a few after kube-apiserver)…" ;;
    *) say "building $name…" ;;
  esac
  t0=$SECONDS
  (cd "$here/$dir" && exec env "${env[@]}" "${detach[@]}" nice -n 10 "$go_cmd" "${cmd[@]}" -o "$part" "$pkg") &
  job=$!
  if ! wait "$job"; then job=""; say "building $name failed"; exit 1; fi
  job=""
  mv -f "$part" "$bindir/$name"
  part=""
  say "built $name in $((SECONDS - t0)) s"
done < <(wanted)

[[ -z $(missing) ]] || { say "still missing in $bindir: $(missing | tr '\n' ' ')"; exit 1; }
echo "$bindir"
