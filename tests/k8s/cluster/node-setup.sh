#!/bin/bash
# Runs in an e2e guest (tests/e2e/lib.sh): makes it a kubelet node.
#   node-setup.sh NAME NODE_IP POD_CIDR API_ADDRESS ROUTES...
# ROUTES: "CIDR=VIA" for the other nodes' pod networks and the service range.
# Expects: the "pillar-k8s-bin" share (kubelet, containerd, runc, CNI
# plugins), /etc/kubernetes/{kubelet.kubeconfig,ca.crt} and
# /etc/kubernetes/images/*.tar written by the host. Starts containerd and
# kubelet in the background (logs in /var/log/{containerd,kubelet}.log) and
# imports the images.
set -euo pipefail
name=$1 node_ip=$2 pod_cidr=$3 api=$4
shift 4
say() { printf 'node-setup %s [%s]: %s\n' "$name" "$(cut -d' ' -f1 /proc/uptime)" "$*"; }

bin=/opt/pillar-k8s/bin
mkdir -p "$bin"
mountpoint -q "$bin" ||
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose pillar-k8s-bin "$bin"
export PATH=$bin:$PATH
mkdir -p /opt/cni/bin
for p in bridge host-local loopback portmap; do ln -sf "$bin/$p" "/opt/cni/bin/$p"; done

# cgroup v2 (the guests' init mounts none), every controller delegated.
if ! mountpoint -q /sys/fs/cgroup; then mount -t cgroup2 cgroup2 /sys/fs/cgroup; fi
ctrls=$(sed 's/\([^ ]*\)/+\1/g' /sys/fs/cgroup/cgroup.controllers)
echo "$ctrls" >/sys/fs/cgroup/cgroup.subtree_control
# loop: a systemd host has /dev/loop-control from the start (kmod's static
# nodes), and opening it loads the module; the guests' init makes no static
# nodes, so the agent's losetup found no loop device at all.
modprobe -a overlay bridge veth br_netfilter loop
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=0 net.bridge.bridge-nf-call-ip6tables=0
for r in "$@"; do ip route replace "${r%%=*}" via "${r#*=}"; done
say "cgroup2, modules, routes"

# Bidirectional mount propagation (the node plugin's kubelet dir) needs a
# shared root mount; without systemd the root is private.
mount --make-rshared /

# CNI: one bridge per node, its pod CIDR by host-local, no masquerading (the
# other nodes and the control plane route pod CIDRs to their node); no
# portmap (no hostPort outside the host network here, and no iptables).
mkdir -p /etc/cni/net.d
cat >/etc/cni/net.d/10-pillar.conflist <<CNI
{"cniVersion": "1.0.0", "name": "pillar-pods", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
CNI

# containerd 2.x: cgroupfs (runc's default, SystemdCgroup false), our pause.
mkdir -p /etc/containerd /var/log
cat >/etc/containerd/config.toml <<'TOML'
version = 3
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = 'registry.k8s.io/pause:3.10.2'
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/opt/cni/bin']
  conf_dir = '/etc/cni/net.d'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
TOML
# The store the host pre-filled (tests/k8s/cluster/store.sh), a copy-on-write
# disk of this guest: the images are there, unpacked, before containerd starts.
store=$(blkid -L pillar-store 2>/dev/null || true)
if [[ -n $store ]]; then
  mkdir -p /var/lib/containerd
  mount -t ext4 "$store" /var/lib/containerd
  say "containerd's store from $store"
fi
setsid containerd --config /etc/containerd/config.toml </dev/null >/var/log/containerd.log 2>&1 &
for _ in $(seq 600); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
ctr version >/dev/null || { say "containerd did not start"; tail -20 /var/log/containerd.log; exit 1; }
say "containerd up"

# Images the host prepared (one OCI archive, each image under its full name).
for t in /etc/kubernetes/images/*.tar; do
  [[ -e $t ]] || continue
  t0=$(cut -d' ' -f1 /proc/uptime)
  ctr -n k8s.io images import "$t" >/dev/null
  say "imported $(basename "$t" .tar) ($(du -m "$t" | cut -f1) MB) in $(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN{printf "%.1f", b-a}') s"
done

# kubelet: cgroupfs, containerd's socket, x509 clients of the cluster CA, no
# eviction that a small test disk could trip.
mkdir -p /var/lib/kubelet /var/lib/kubelet/plugins_registry /var/lib/kubelet/plugins
cat >/etc/kubernetes/kubelet.yaml <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: /etc/kubernetes/ca.crt}
authorization: {mode: AlwaysAllow}
failSwapOn: false
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: 10Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
runtimeRequestTimeout: 10m
podPidsLimit: -1
YAML
touch /etc/resolv.conf
setsid kubelet --config=/etc/kubernetes/kubelet.yaml --kubeconfig=/etc/kubernetes/kubelet.kubeconfig \
  --hostname-override="$name" --node-ip="$node_ip" --v=1 </dev/null >/var/log/kubelet.log 2>&1 &
say "kubelet started (api $api)"
