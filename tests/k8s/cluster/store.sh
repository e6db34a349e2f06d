#!/usr/bin/env bash
# A pre-filled containerd store for the cluster's nodes: the images of the
# OCI archives given, imported and unpacked (overlayfs snapshots) by a
# containerd run on the host, at native speed, written into a raw ext4 image
# that each guest boots with as a copy-on-write disk (vm_start --disk-image)
# and mounts at /var/lib/containerd (node-setup.sh). Under TCG a guest's own
# `ctr import` cost ~0.5 s per MB (the storage node's 166 MB: 158 s).
#   store.sh NODE_BIN ARCHIVE.oci.tar...   prints the image's path (last line)
# Cached by the archives' manifests (index.json: the image digests) and the
# containerd version, in ${PILLAR_K8S_STORE_CACHE:-/var/cache/pillar-e2e}
# beside the guests' root image; the two newest are kept.
set -euo pipefail
bin=$1
shift
cache=${PILLAR_K8S_STORE_CACHE:-/var/cache/pillar-e2e}
say() { printf 'store: %s\n' "$*" >&2; }
key=$({
  "$bin/containerd" --version
  echo "layout 1"
  for a in "$@"; do tar -xOf "$a" ./index.json; echo; done
} | sha256sum | cut -c1-16)
img=$cache/k8s-store-$key.img
mkdir -p "$cache"
exec 8>"$cache/.k8s-store.lock"
flock 8
if [[ -s $img ]]; then
  say "cached: $img"
  echo "$img"
  exit 0
fi
t0=$SECONDS
tmp=$(mktemp -d /var/tmp/pillar-k8s-store.XXXXXX)
cpid=""
cleanup() {
  local rc=$?
  if [[ -n $cpid ]]; then kill -TERM "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null; fi
  # containerd unmounts what it mounted; a killed one may not have.
  { grep -o " $tmp/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$tmp" "$img.part"
  exit "$rc"
}
trap cleanup EXIT
mkdir -p "$tmp/root" "$tmp/state" "$tmp/sock"
# No CRI, no NRI: this containerd only imports and unpacks.
cat >"$tmp/config.toml" <<TOML
version = 3
root = '$tmp/root'
state = '$tmp/state'
disabled_plugins = ['io.containerd.grpc.v1.cri', 'io.containerd.cri.v1.runtime', 'io.containerd.cri.v1.images',
  'io.containerd.nri.v1.nri', 'io.containerd.podsandbox.controller.v1.podsandbox']
[grpc]
  address = '$tmp/sock/containerd.sock'
[ttrpc]
  address = '$tmp/sock/containerd.sock.ttrpc'
[debug]
  address = ''
[metrics]
  address = ''
TOML
setsid "$bin/containerd" --config "$tmp/config.toml" </dev/null >"$tmp/containerd.log" 2>&1 &
cpid=$!
ctr=("$bin/ctr" --address "$tmp/sock/containerd.sock" --namespace k8s.io)
for _ in $(seq 100); do "${ctr[@]}" version >/dev/null 2>&1 && break; sleep 0.1; done
"${ctr[@]}" version >/dev/null 2>&1 || { say "containerd did not start: $(tail -5 "$tmp/containerd.log")"; exit 1; }
for a in "$@"; do
  "${ctr[@]}" images import --snapshotter overlayfs "$a" >/dev/null 2>"$tmp/ctr.log" ||
    { say "importing $a failed: $(grep -v DEPRECATION "$tmp/ctr.log" | tail -3)"; exit 1; }
done
say "imported $("${ctr[@]}" images ls -q 2>/dev/null | wc -l) images in $((SECONDS - t0)) s"
kill -TERM "$cpid"
wait "$cpid" 2>/dev/null || true
cpid=""
# This containerd's identity and runtime state are not the nodes'.
rm -rf "$tmp/root/io.containerd.grpc.v1.introspection" "$tmp/root/io.containerd.runtime.v2.task"
size=$(du -sm "$tmp/root" | cut -f1)
mkfs.ext4 -q -F -L pillar-store -E root_owner=0:0 -d "$tmp/root" "$img.part" "$((size * 13 / 10 + 1024))M" >/dev/null
mv -f "$img.part" "$img"
# Keep the two newest stores.
ls -t "$cache"/k8s-store-*.img 2>/dev/null | tail -n +3 | xargs -r rm -f
say "made $img ($size MB of images) in $((SECONDS - t0)) s"
echo "$img"
