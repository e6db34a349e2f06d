#!/usr/bin/env bash
# Prints the paths of the VolumeSnapshot CRDs (snapshot.storage.k8s.io:
# volumesnapshotclasses, volumesnapshotcontents, volumesnapshots), one a
# line, as the external-snapshotter release of tests/k8s/csi-tools/
# csi-snapshotter (the csi-snapshotter sidecar and snapshot-controller that
# build-csi-tools.sh builds) ships them: its client module carries
# config/crd/. The module comes from the Go module cache, downloaded (and
# checked against the committed go.sum) when absent, so run this before
# entering a network namespace without the network.
#
# usage: snapshot-crds.sh
# env:   GO  go command (default: go in PATH, else /usr/local/go/bin/go)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod=github.com/kubernetes-csi/external-snapshotter/client/v8
go_cmd=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
dir=$(cd "$here/csi-tools/csi-snapshotter" &&
  GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly" "$go_cmd" mod download -json "$mod" | jq -r '.Dir // empty')
[[ -n $dir ]] || { echo "snapshot-crds: $mod not in the module cache and not downloadable" >&2; exit 1; }
for r in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
  f=$dir/config/crd/snapshot.storage.k8s.io_$r.yaml
  [[ -s $f ]] || { echo "snapshot-crds: no $f" >&2; exit 1; }
  echo "$f"
done
