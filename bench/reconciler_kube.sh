#!/usr/bin/env bash
# The reconciler benchmark (bench/reconciler_bench.cc) on the Kubernetes
# store: a real kube-apiserver and etcd on loopback (tests/k8s/lib.sh),
# pillar's CRDs, then reconciler_bench VOLUMES AGENTS kube:KUBECONFIG. Prints
# the bench's figures (controller CPU and API requests per no-drift resync).
#   bench/reconciler_kube.sh [volumes=10000] [agents=10]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PILLAR_BUILD_DIR:-$root/build}
[[ $build == /* ]] || build=$root/$build
# shellcheck source=../tests/k8s/lib.sh
source "$root/tests/k8s/lib.sh"
k8s_tools
W=$(mktemp -d "${TMPDIR:-/tmp}/pillar-bench-kube.XXXXXX")
k8s_up "$W"
k8s_kubectl apply --server-side -f "$root/deploy/crds/" >/dev/null
k8s_kubectl wait --for=condition=Established --timeout=60s crd --all >/dev/null
echo "bench: reconciler_bench ${1:-10000} ${2:-10} kube:$K8S_KUBECONFIG"
"$build/bench/reconciler_bench" "${1:-10000}" "${2:-10}" "kube:$K8S_KUBECONFIG"
k8s_down "$W"
rm -rf "$W"
