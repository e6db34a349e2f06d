#!/usr/bin/env bash
# csi-sanity.sh: the Kubernetes CSI conformance suite (csi-sanity, from
# github.com/kubernetes-csi/csi-test) against pillar on real kernels.
#
#   scripts/csi-sanity.sh                         # every protocol; exit != 0 on any failure
#   SANITY_ONLY="nfs nvme-block" scripts/csi-sanity.sh   # a subset (nvme, nvme-block, iscsi, nfs)
#   PILLAR_E2E_SKIP_BUILD=1 ...                   # use build/ as it is
#   SANITY_FOCUS='Node Service' ...               # passed as --ginkgo.focus
#
# Topology (the e2e harness, tests/e2e/lib.sh): "storage" (10.99.0.1) runs
# pillar-agent over the kernel's nvmet, LIO and knfsd, and pillar-controller
# (SQLite store, CSI on TCP 10.99.0.1:9700 so another guest can reach it);
# "consumer-a" (10.99.0.11) runs pillar-node and csi-sanity itself (a static
# Go binary copied in), which talks to the node plugin on its unix socket and
# to the controller over the guest network. The same two guests serve one
# run of the whole suite per protocol:
#   nvme        nvmeof-tcp, mount access (ext4)
#   nvme-block  nvmeof-tcp, raw block access
#   iscsi       iscsi, mount access
#   nfs         nfs, mount access
# Volume size and parameters come from csi-sanity's own flags
# (--csi.testvolumesize, --csi.testvolumeparameters, --csi.testvolumeaccesstype).
#
# csi-sanity is built once per version with `go install` into
# ${PILLAR_SANITY_CACHE:-/var/cache/pillar-k8s-tools}/csi-sanity-<version>/bin.
# Prints each run's counts, the specs that failed or were skipped, then
#   csi-sanity: N passed, M failed, K skipped
#   csi-sanity: N passed, M failed
# (the last line is the one scripts/test.sh reads).
set -euo pipefail

# shellcheck source=../tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"

SANITY_VERSION="${PILLAR_SANITY_VERSION:-v5.6.0}"
SANITY_DIR="${PILLAR_SANITY_CACHE:-/var/cache/pillar-k8s-tools}/csi-sanity-$SANITY_VERSION"
SANITY_BIN="$SANITY_DIR/bin/csi-sanity"
RUNS="nvme nvme-block iscsi nfs"
ONLY="${SANITY_ONLY:-$RUNS}"
SIZE=$((16 << 20))          # --csi.testvolumesize: small, a multiple of 4 MiB
EXPAND_SIZE=$((32 << 20))   # --csi.testvolumeexpandsize
STORAGE_IP=10.99.0.1
CONSUMER_IP=10.99.0.11
CTRL_ADDR="$STORAGE_IP:9700"
REGISTRY="$STORAGE_IP:9600"
BUILD="${PILLAR_E2E_BUILD:-$E2E_SRC/build}"
GH="$E2E_DIR/pillar-guest.sh"
NODE_SOCK=unix:///run/pillar/node.sock
POOL_DIR=/var/lib/pillar-e2e/pool
CEILING=120
TOTAL_PASS=0
TOTAL_FAIL=0
TOTAL_SKIP=0
declare -a SUMMARY=()

log() { e2e_log "$*"; }

ensure_sanity() {
  [[ -x "$SANITY_BIN" ]] && return 0
  command -v go >/dev/null || e2e_die "csi-sanity $SANITY_VERSION is not in $SANITY_DIR and go is not installed"
  log "building csi-sanity $SANITY_VERSION into $SANITY_DIR"
  local tmp
  mkdir -p "$SANITY_DIR"
  tmp="$(mktemp -d "$SANITY_DIR/.build.XXXXXX")"
  CGO_ENABLED=0 GOBIN="$tmp" go install \
    "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity@$SANITY_VERSION" >&2
  mkdir -p "$SANITY_DIR/bin"
  mv -f "$tmp/csi-sanity" "$SANITY_BIN"
  rm -rf "$tmp"
}

build_binaries() {
  [[ "${PILLAR_E2E_SKIP_BUILD:-0}" == 1 ]] && return 0
  [[ -f "$BUILD/CMakeCache.txt" ]] || cmake -S "$E2E_SRC" -B "$BUILD" -G Ninja >/dev/null
  cmake --build "$BUILD" -j"${PILLAR_E2E_JOBS:-1}" \
    --target pillar-agent pillar-controller pillar-node >&2
}

guest_daemon() { # GUEST NAME CMD...: run CMD in the background, log in /e2e/out/NAME.log
  local g="$1" name="$2"
  shift 2
  vm_exec_bg "$g" bash "$GH" daemon "$name" "/e2e/out/$name.log" "$@" >/dev/null
}

setup_guests() {
  bash "$E2E_SRC/tests/tools/make-certs.sh" "$(vm_dir storage)/share/certs"
  vm_sh storage '
    set -e
    mkdir -p /var/lib/pillar-csi/controller "$1" /etc/exports.d
    modprobe -a loop nvmet nvmet-tcp target_core_mod target_core_iblock iscsi_target_mod
    pillar-nfs-server start >/dev/null' "$POOL_DIR"
  vm_sh consumer-a 'modprobe -a nvme-tcp nvme-fabrics iscsi_tcp sd_mod nfs; mkdir -p /run/pillar'
  guest_daemon storage pillar-agent "$BUILD/src/agent/pillar-agent" --listen=127.0.0.1:9500 \
    --tls-cert=/e2e/certs/agent.crt --tls-key=/e2e/certs/agent.key --tls-ca=/e2e/certs/ca.crt \
    --node-name=storage-1 --pool="demo=file:$POOL_DIR" \
    --state-dir=/var/lib/pillar-csi/agent --ready-file=/run/pillar-agent.ready --log-level=info
  vm_exec storage bash "$GH" wait-file /run/pillar-agent.ready "$CEILING" >/dev/null
  guest_daemon storage pillar-controller "$BUILD/src/controller/pillar-controller" --csi-endpoint="$CTRL_ADDR" \
    --registry-listen="$REGISTRY" --registry-insecure \
    --store=/var/lib/pillar-csi/controller/store.db --agent="storage-1=127.0.0.1:9500" \
    --agent-tls-cert=/e2e/certs/controller.crt --agent-tls-key=/e2e/certs/controller.key \
    --agent-tls-ca=/e2e/certs/ca.crt --resync-interval=30 \
    --ready-file=/run/pillar-controller.ready --log-level=info
  vm_exec storage bash "$GH" wait-file /run/pillar-controller.ready "$CEILING" >/dev/null
  guest_daemon consumer-a pillar-node "$BUILD/src/node/pillar-node" --csi-endpoint="$NODE_SOCK" \
    --node-id=consumer-a --registry-address="$REGISTRY" --registry-insecure \
    --state-dir=/var/lib/pillar-csi/node --identity-interval=2s --device-timeout=30s \
    --log-level=info
  # csi-sanity publishes to the node ID NodeGetInfo returns: the controller
  # must know that node (its identities) first. The log is on the 9p share.
  local node_log deadline
  node_log="$(vm_dir consumer-a)/share/out/pillar-node.log"
  deadline=$(($(e2e__now) + CEILING * 1000000))
  until grep -q '"msg":"node identity reported"' "$node_log" 2>/dev/null; do
    (($(e2e__now) < deadline)) || e2e_die "pillar-node did not report its identity to $REGISTRY"
    e2e__sleep 0.2
  done
  vm_copy_in consumer-a "$SANITY_BIN" /usr/local/bin
}

# run_suite RUN PROTOCOL ACCESS_TYPE: one whole csi-sanity run.
run_suite() {
  local run="$1" proto="$2" access="$3" out t0 rc=0 params
  [[ " $ONLY " == *" $run "* ]] || return 0
  out="$(vm_dir consumer-a)/share/out"
  params="/e2e/out/params-$run.yaml"
  printf 'agent: storage-1\npool: demo\nprotocol: %s\nbindAddress: %s\n' "$proto" "$STORAGE_IP" \
    >"$out/params-$run.yaml"
  local -a focus=()
  [[ -n "${SANITY_FOCUS:-}" ]] && focus=(--ginkgo.focus "$SANITY_FOCUS")
  log "csi-sanity run $run: protocol $proto, access type $access"
  t0=$(e2e__now)
  vm_exec consumer-a mkdir -p "/var/lib/sanity/$run"
  vm_exec consumer-a --timeout 1800 csi-sanity \
    --csi.endpoint="$NODE_SOCK" --csi.controllerendpoint="dns:///$CTRL_ADDR" \
    --csi.stagingdir="/var/lib/sanity/$run/staging" --csi.mountdir="/var/lib/sanity/$run/mount" \
    --csi.testvolumeparameters="$params" --csi.testvolumesize="$SIZE" \
    --csi.testvolumeexpandsize="$EXPAND_SIZE" --csi.testvolumeaccesstype="$access" \
    --csi.testnodevolumeattachlimit \
    --ginkgo.junit-report="/e2e/out/junit-$run.xml" --ginkgo.no-color --ginkgo.v \
    "${focus[@]}" >"$E2E_RUN/sanity-$run.log" 2>&1 || rc=$?
  local secs=$((($(e2e__now) - t0) / 1000000))
  local counts
  if ! counts="$(junit_counts "$out/junit-$run.xml")"; then
    echo "FAIL: $run: no JUnit report (csi-sanity exit $rc); last lines of its output:"
    tail -n 30 "$E2E_RUN/sanity-$run.log"
    TOTAL_FAIL=$((TOTAL_FAIL + 1))
    SUMMARY+=("$(printf 'csi-sanity %-11s %-11s no report (exit %d)' "$run" "$proto" "$rc")")
    return 0
  fi
  local p f s
  read -r p f s <<<"$(head -n 1 <<<"$counts")"
  tail -n +2 <<<"$counts"
  if ((f > 0)); then
    echo "---- $run: failure details (from $E2E_RUN/sanity-$run.log)"
    grep -E -A12 '^\s*\[FAIL\]|^  \[FAILED\]' "$E2E_RUN/sanity-$run.log" | head -n 120 || true
  fi
  TOTAL_PASS=$((TOTAL_PASS + p))
  TOTAL_FAIL=$((TOTAL_FAIL + f))
  TOTAL_SKIP=$((TOTAL_SKIP + s))
  SUMMARY+=("$(printf 'csi-sanity %-11s %-11s %-6s %3d passed, %d failed, %2d skipped in %d s' \
    "$run" "$proto" "$access" "$p" "$f" "$s" "$secs")")
  echo "figure: csi-sanity $run in $secs s"
}

# junit_counts FILE: "PASSED FAILED SKIPPED", then one line per failed or
# skipped spec with the reason.
junit_counts() {
  [[ -s "$1" ]] || return 1
  python3 - "$1" <<'EOF'
import sys
import xml.etree.ElementTree as ET

def first_line(el):
    text = (el.get("message") or el.text or "").strip()
    return text.splitlines()[0][:240] if text else ""


passed = failed = skipped = 0
lines = []
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = case.get("name", "?")
    bad = case.find("failure")
    if bad is None:
        bad = case.find("error")
    skip = case.find("skipped")
    if bad is not None:
        failed += 1
        lines.append("  failed: %s: %s" % (name, first_line(bad)))
    elif skip is not None:
        skipped += 1
        lines.append("  skipped: %s: %s" % (name, first_line(skip)))
    elif case.get("status") == "pending":
        skipped += 1
        lines.append("  skipped (pending): %s" % name)
    else:
        passed += 1
print(passed, failed, skipped)
print("\n".join(lines))
EOF
}

main() {
  local t0 all0
  for r in $ONLY; do
    [[ " $RUNS " == *" $r "* ]] || { echo "csi-sanity: unknown run \"$r\" (runs: $RUNS)" >&2; exit 2; }
  done
  all0=$(e2e__now)
  ensure_sanity
  build_binaries
  vm_init
  t0=$(e2e__now)
  vm_start storage --ip "$STORAGE_IP/24"
  vm_start consumer-a --ip "$CONSUMER_IP/24"
  vm_wait_ready storage
  vm_wait_ready consumer-a
  setup_guests
  log "guests booted and pillar started in $(e2e__ms_since "$t0") ms (run dir $E2E_RUN)"

  run_suite nvme nvmeof-tcp mount
  run_suite nvme-block nvmeof-tcp block
  run_suite iscsi iscsi mount
  run_suite nfs nfs mount

  echo "---- csi-sanity $SANITY_VERSION, logs in $E2E_RUN (sanity-*.log, vm/*/share/out)"
  printf '%s\n' "${SUMMARY[@]}"
  echo "figure: csi-sanity wall time $((($(e2e__now) - all0) / 1000000)) s"
  echo "csi-sanity: $TOTAL_PASS passed, $TOTAL_FAIL failed, $TOTAL_SKIP skipped"
  echo "csi-sanity: $TOTAL_PASS passed, $TOTAL_FAIL failed"
  [[ $TOTAL_FAIL -eq 0 ]]
}

main "$@"
