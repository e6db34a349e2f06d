# shellcheck shell=bash
# Sourced by cluster.sh after pillar.sh: Kubernetes' external storage e2e
# suite (e2e.test from k8s.io/kubernetes at the cluster's release, built by
# tests/k8s/build-node-tools.sh) against pillar, one e2e.test per protocol,
# the protocols at once, each with its test-driver file in drivers/.
#   PILLAR_K8S_E2E_SUITE=ci    (default) one spec per protocol (the CI budget)
#   PILLAR_K8S_E2E_SUITE=broad the ten specs below (seven took about 9 min here)
#   PILLAR_K8S_E2E_SUITE=full  every External.Storage spec (1.5-3 h a protocol)
#   PILLAR_K8S_E2E_SUITE=0     none
#   PILLAR_K8S_E2E_SUITE_PROTOCOLS  (default "nvmeof-tcp iscsi nfs")
# A spec counts as passed only when e2e.test ran and passed it; in the ci
# set every chosen spec must run (a skip there is a failure: the driver file
# or the cluster lost a capability).
# shellcheck disable=SC2154 # cluster.sh's W, NODE_BIN, here, passed, failed
suite_mode=${PILLAR_K8S_E2E_SUITE:-ci}
suite_protocols=${PILLAR_K8S_E2E_SUITE_PROTOCOLS:-nvmeof-tcp iscsi nfs}
# The broad set: provisioning and data (volumes), block mode, online expansion,
# several volumes in one pod or one volume in several (multiVolume, whose
# patterns say "filesystem volmode", not "default fs"), and a snapshot's
# life (the suite's snapshottable spec: fields, restore after the source
# changed, deletion) per protocol.
suite_snap='\[Testpattern: Dynamic Snapshot \(delete policy\)\] snapshottable.* should check snapshot fields, check restore correctly works after modifying source data, check deletion \(persistent\)'
declare -A suite_broad=(
  [nvmeof-tcp]='\[Testpattern: Dynamic PV \(default fs\)\] volumes should store data|\[Testpattern: Dynamic PV \(block volmode\)\] volumes should store data|\[Testpattern: Dynamic PV \(default fs\)\(allowExpansion\)\] volume-expand should resize volume when PVC is edited while pod is using it|'$suite_snap
  [iscsi]='\[Testpattern: Dynamic PV \(default fs\)\] volumes should store data|\[Testpattern: Dynamic PV \(block volmode\)\] multiVolume.* should access to two volumes with the same volume mode and retain data across pod recreation on the same node|'$suite_snap
  [nfs]='\[Testpattern: Dynamic PV \(default fs\)\] volumes should store data|\[Testpattern: Dynamic PV \(filesystem volmode\)\] multiVolume.* should concurrently access the single volume from pods on the same node|'$suite_snap)
declare -A suite_broad_count=([nvmeof-tcp]=4 [iscsi]=3 [nfs]=3)
# The ci set: the suite's own provisioning-and-data spec per protocol, in
# block mode on nvmeof-tcp (the lives of the ci set are filesystem volumes;
# expansion and two consumers are theirs).
declare -A suite_ci=(
  [nvmeof-tcp]='\[Testpattern: Dynamic PV \(block volmode\)\] volumes should store data'
  [iscsi]='\[Testpattern: Dynamic PV \(default fs\)\] volumes should store data'
  [nfs]='\[Testpattern: Dynamic PV \(default fs\)\] volumes should store data')
declare -A suite_ci_count=([nvmeof-tcp]=1 [iscsi]=1 [nfs]=1)
if [[ $suite_mode == broad ]]; then
  for proto in "${!suite_broad[@]}"; do
    suite_ci[$proto]=${suite_broad[$proto]}
    suite_ci_count[$proto]=${suite_broad_count[$proto]}
  done
fi

# suite_run PROTOCOL: one e2e.test; its report in $W/suite/PROTOCOL/.
suite_run() {
  local proto=$1 out=$W/suite/$1 focus skip
  mkdir -p "$out"
  if [[ $suite_mode == full ]]; then
    focus='External.Storage'
    skip='\[Disruptive\]|\[Serial\]'
  else
    focus="External.Storage.*($(tr -d '\n' <<<"${suite_ci[$proto]}"))"
    skip='\[Disruptive\]|\[Serial\]'
  fi
  "$NODE_BIN/e2e.test" -kubeconfig "$W/kubeconfig" \
    -storage.testdriver="$here/drivers/$proto.yaml" \
    -ginkgo.focus="$focus" -ginkgo.skip="$skip" -ginkgo.no-color -ginkgo.timeout=4h \
    -ginkgo.junit-report="$out/junit.xml" -report-dir="$out" \
    -ginkgo.v -ginkgo.poll-progress-after=120s >"$out/e2e.log" 2>&1
}

if [[ $suite_mode != 0 ]]; then
  t_suite=$(now_ms)
  declare -A suite_pid=()
  for proto in $suite_protocols; do
    suite_run "$proto" &
    suite_pid[$proto]=$!
  done
  for proto in $suite_protocols; do
    wait "${suite_pid[$proto]}"
    rc=$?
    log=$W/suite/$proto/e2e.log
    # Ginkgo's summary: "Ran N of M Specs in S seconds" and
    # "... -- P Passed | F Failed | X Pending | K Skipped".
    sum=$(grep -E '[0-9]+ Passed \| [0-9]+ Failed \| [0-9]+ Pending \| [0-9]+ Skipped' "$log" | tail -1)
    ran=$(sed -n 's/^Ran \([0-9]*\) of \([0-9]*\) Specs in \([0-9.]*\) seconds.*/\1 \2 \3/p' "$log" | tail -1)
    p=$(sed -n 's/.* \([0-9]*\) Passed |.*/\1/p' <<<"$sum") f=$(sed -n 's/.*| \([0-9]*\) Failed |.*/\1/p' <<<"$sum")
    k=$(sed -n 's/.*| \([0-9]*\) Skipped.*/\1/p' <<<"$sum")
    if [[ -z $sum ]]; then
      fail "external suite $proto: no summary from e2e.test (exit $rc)" "$(tail -5 "$log")"
      continue
    fi
    # The slowest specs (JUnit times), for the README's table.
    slow=$(grep -o '<testcase name="[^"]*"[^>]*time="[0-9.]*"' "$W/suite/$proto/junit.xml" 2>/dev/null |
      grep -v 'status="skipped"' | grep -F '[It]' | sed -E 's/<testcase name="([^"]*)".*time="([0-9.]*)"/\2 \1/' | sort -rn | head -3 |
      awk '{ t = $1; $1 = ""; printf "  %.0f s%s\n", t, $0 }')
    figure "external suite $proto: ${p:-0} passed, ${f:-0} failed, ${k:-0} skipped (ran ${ran%% *} of $(cut -d' ' -f2 <<<"$ran") specs) in $(cut -d' ' -f3 <<<"$ran" | cut -d. -f1) s"
    [[ -z $slow ]] || { echo "slowest specs ($proto):"; echo "$slow"; }
    passed=$((passed + ${p:-0}))
    if ((${f:-0} > 0)); then
      failed=$((failed + f))
      echo "FAIL - external suite $proto: $f failed:"
      grep -E '^\s*\[FAIL\]' "$log" | sort -u | head -20
    fi
    if [[ $suite_mode == ci || $suite_mode == broad ]] && ((${p:-0} + ${f:-0} != ${suite_ci_count[$proto]})); then
      fail "external suite $proto: ran $((${p:-0} + ${f:-0})) of the ${suite_ci_count[$proto]} chosen specs" \
        "$(grep -E 'SKIPPED|skipping' "$log" | head -5)"
    fi
    ((rc == 0 || ${f:-0} > 0)) || fail "external suite $proto: e2e.test exit $rc" "$(tail -5 "$log")"
  done
  figure "external suite ($suite_mode; $suite_protocols at once) in $(since "$t_suite") s"
fi
