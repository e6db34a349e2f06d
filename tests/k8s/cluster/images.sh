#!/usr/bin/env bash
# Makes the images a cluster node imports, as docker archives with their full
# names (ctr -n k8s.io images import keeps them), from binaries built here:
#   images.sh OUT-DIR KIND...
# KIND:
#   pause        registry.k8s.io/pause:3.10.2 (tests/k8s/tools/cmd/pause; the
#                sandbox image containerd is pinned to)
#   busybox      registry.k8s.io/e2e-test-images/busybox:1.37.0-2 (Debian's
#                busybox-static with its applet links; the workload image),
#                also named registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1
#                (the image e2e.test's multiVolume specs run)
#   registrar    pillar.test/csi-node-registrar:dev (tests/k8s/tools/cmd/csi-node-registrar)
#   csi-provisioner csi-attacher csi-resizer csi-snapshotter
#                registry.k8s.io/sig-storage/NAME:VERSION from $CSI_BIN
#   pillar-agent pillar-controller pillar-node
#                scripts/build-images.sh's OCI archives, renamed
#                ghcr.io/bhyoo/NAME:TAG (TAG: the archive's own)
# Writes OUT-DIR/KIND.tar; prints "KIND NAME" lines (the image name).
#   images.sh --bundle OUT-DIR BUNDLE KIND...
# puts the images OUT-DIR/KIND.tar (made before) into one OCI archive
# OUT-DIR/BUNDLE.oci.tar, each under its full name: a node imports it with one
# ctr call (each ctr start costs seconds under TCG).
# Needs: umoci, skopeo (scripts/build-images.sh --install-deps), busybox-static, go.
set -euo pipefail
if [[ ${1:-} == --bundle ]]; then
  out=$2 bundle=$3
  shift 3
  layout=$(mktemp -d "$out/.bundle.XXXXXX")
  trap 'rm -rf "$layout"' EXIT
  for kind in "$@"; do
    # Every name of the archive (busybox has two), each a ref of the same blobs.
    for ref in $(tar -xOf "$out/$kind.tar" manifest.json | jq -r '.[0].RepoTags[]'); do
      skopeo copy --quiet "docker-archive:$out/$kind.tar" "oci:$layout/l:$ref"
    done
  done
  tar -C "$layout/l" -cf "$out/$bundle.oci.tar" .
  exit 0
fi
out=$1
shift
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
mkdir -p "$out"
work=$(mktemp -d "$out/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
created=$(git -C "$root" log -1 --format=%cI 2>/dev/null || date -Is)

# one_binary KIND NAME:TAG BINARY [ENTRYPOINT-ARGS...]: an image of one static binary.
one_binary() {
  local kind=$1 ref=$2 bin=$3
  shift 3
  local l=$work/layout-$kind r=$work/root-$kind
  mkdir -p "$r/usr/local/bin"
  cp "$bin" "$r/usr/local/bin/"
  # Fixed times: the same binary makes the same layer digest (store.sh's cache key).
  find "$r" -exec touch -h -d "$created" {} +
  umoci init --layout "$l" >/dev/null
  umoci new --image "$l:img" >/dev/null
  umoci insert --image "$l:img" --history.created "$created" "$r" / >/dev/null
  local cfg=(--config.entrypoint "/usr/local/bin/$(basename "$bin")")
  local a
  for a in "$@"; do cfg+=(--config.entrypoint "$a"); done
  umoci config --image "$l:img" --architecture amd64 --os linux --created "$created" --no-history "${cfg[@]}" >/dev/null
  skopeo copy --quiet "oci:$l:img" "docker-archive:$out/$kind.tar:$ref"
  echo "$kind $ref"
}

gobuild() { # gobuild PKG OUT: a static binary from the tools module
  (cd "$root/tests/k8s/tools" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly" \
    go build -trimpath -ldflags='-s -w' -o "$2" "$1")
}

for kind in "$@"; do
  case $kind in
    pause)
      gobuild ./cmd/pause "$work/pause"
      one_binary pause registry.k8s.io/pause:3.10.2 "$work/pause" ;;
    registrar)
      gobuild ./cmd/csi-node-registrar "$work/csi-node-registrar"
      one_binary registrar pillar.test/csi-node-registrar:dev "$work/csi-node-registrar" ;;
    busybox)
      bb=/bin/busybox
      [[ -x $bb ]] && "$bb" --list >/dev/null 2>&1 && ldd "$bb" 2>&1 | grep -q "not a dynamic" ||
        { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends busybox-static >/dev/null; }
      r=$work/root-busybox
      mkdir -p "$r/bin" "$r/tmp" "$r/etc"
      cp /bin/busybox "$r/bin/busybox"
      for a in $(/bin/busybox --list); do [[ $a == busybox ]] || ln -sf busybox "$r/bin/$a"; done
      printf 'root:x:0:0:root:/root:/bin/sh\n' >"$r/etc/passwd"
      printf 'root:x:0:\n' >"$r/etc/group"
      find "$r" -exec touch -h -d "$created" {} +
      l=$work/layout-busybox
      umoci init --layout "$l" >/dev/null
      umoci new --image "$l:img" >/dev/null
      umoci insert --image "$l:img" --history.created "$created" "$r" / >/dev/null
      umoci config --image "$l:img" --architecture amd64 --os linux --created "$created" --no-history --config.cmd /bin/sh \
        --config.env PATH=/bin >/dev/null
      ref=registry.k8s.io/e2e-test-images/busybox:1.37.0-2
      # The same image under the second name e2e.test runs its pods from
      # (multiVolume's concurrent-access specs: a shell, sleep, dd, md5sum).
      also=registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1
      skopeo copy --quiet --additional-tag "$also" "oci:$l:img" "docker-archive:$out/busybox.tar:$ref"
      echo "busybox $ref"
      echo "busybox $also" ;;
    csi-provisioner|csi-attacher|csi-resizer|csi-snapshotter)
      ver=$("${CSI_BIN:?}/$kind" --version 2>&1 | grep -o 'v[0-9][0-9.]*' | head -1)
      one_binary "$kind" "registry.k8s.io/sig-storage/$kind:$ver" "$CSI_BIN/$kind" ;;
    pillar-agent|pillar-controller|pillar-node)
      a=$(ls "${PILLAR_BUILD_DIR:-$root/build}/images/$kind"-*.oci.tar | head -1)
      tag=$(basename "$a" .oci.tar)
      tag=${tag#"$kind"-}
      skopeo copy --quiet "oci-archive:$a" "docker-archive:$out/$kind.tar:ghcr.io/bhyoo/$kind:$tag"
      echo "$kind ghcr.io/bhyoo/$kind:$tag" ;;
    *) echo "images.sh: unknown image $kind" >&2; exit 2 ;;
  esac
done
