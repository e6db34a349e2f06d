#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test stage:
#   ctest    unit and integration tests (real binaries, real gRPC, SQLite);
#            a skipped test (GTEST_SKIP) is named and fails the run unless
#            tests/expected-skips.txt expects that skip on this machine
#   mutants  scripts/mutants.sh --list short: the CI list of safety guards
#            (tests/mutants.txt); each broken guard must make a test fail
#   fuzz     the libFuzzer targets for a short run each (scripts/fuzz.sh)
#   smoke    the kernel targets by hand in QEMU guests (tests/e2e/smoke.sh)
#   e2e      the seed scenarios with pillar's binaries in QEMU guests
#            (tests/e2e/scenarios.sh)
#   csi-sanity  the Kubernetes CSI conformance suite against pillar in QEMU
#            guests, once per protocol (scripts/csi-sanity.sh)
#   k8s      scripts/test-k8s.sh: a real kube-apiserver, etcd and
#            kube-controller-manager (Go-built, cached) and the suites in
#            tests/k8s/suites (with the real CSI sidecars and helm, Go-built
#            and cached too)
#   images   tests/images/test.sh --build: the OCI image archives of
#            scripts/build-images.sh, unpacked and run with chroot
#   k8s-e2e  scripts/test-k8s-e2e.sh: kubelet nodes in QEMU guests, pillar
#            installed with helm, a workload's life on each protocol and a
#            handful of Kubernetes' external storage specs per protocol
# Every stage ends with "NAME: N passed, M failed" (mutants: "N killed, M
# survived"); a stage that exits non-zero without counting a failure, or
# prints no such line, counts one failure. This script ends with the sum,
# "test: N passed, M failed", and exits non-zero on any failure.
# PILLAR_FUZZ=0, PILLAR_MUTANTS=0, PILLAR_E2E=0 (smoke and e2e), PILLAR_K8S=0,
# PILLAR_IMAGES=0, PILLAR_SANITY=0 (csi-sanity; PILLAR_E2E=0 skips it too),
# PILLAR_K8S_E2E=0 (k8s-e2e; PILLAR_E2E=0 skips it too) skip a stage
# explicitly: it is reported as skipped, never counted as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
total_pass=0 total_fail=0 done_line=0
stages=()
finish() {
  local rc=$?
  ((done_line)) && return
  ((rc == 0 || total_fail > 0)) || total_fail=$((total_fail + 1))
  if ((${#stages[@]})); then
    echo
    echo "---- stages"
    printf '%s\n' "${stages[@]}"
  fi
  echo "test: $total_pass passed, $total_fail failed"
  ((total_fail == 0)) || exit 1
}
trap finish EXIT
abort() { # MESSAGE: a step without which no stage can run
  echo "test: $*" >&2
  stages+=("$(printf '%-8s FAILED: %s' "${1%% *}" "$*")")
  total_fail=$((total_fail + 1))
  exit 1
}

if [[ $(id -u) -ne 0 ]]; then abort "setup: run as root (it installs packages and drives loop devices)"; fi
./scripts/install-deps.sh || abort "setup: scripts/install-deps.sh failed"
tests/e2e/deps.sh || abort "setup: tests/e2e/deps.sh failed"
./scripts/build.sh || abort "build: scripts/build.sh failed"
build=${PILLAR_BUILD_DIR:-build}
logs=$(cd "$build" && pwd)/test-logs
rm -rf "$logs"
mkdir -p "$logs"

# run_stage NAME CMD...: runs CMD (output shown and kept in $logs/NAME.log)
# and adds the counts of its last "NAME: ..." line to the total.
run_stage() {
  local name=$1 rc=0 t0=$SECONDS
  shift
  printf '\n==== %s: %s\n' "$name" "$*"
  "$@" 2>&1 | tee "$logs/$name.log" || rc=$?
  count_stage "$name" "$rc" $((SECONDS - t0))
}
# count_stage NAME RC SECONDS: the counts of $logs/NAME.log's last
# "NAME: N passed, M failed" line into the total, and the stage's line.
count_stage() {
  local name=$1 rc=$2 secs=$3 line p f note=""
  line=$(grep -E "^$name: [0-9]+ (passed|killed), [0-9]+ (failed|survived)\$" "$logs/$name.log" | tail -1 || true)
  if [[ "$line" =~ ^[a-z0-9-]+:\ ([0-9]+)\ [a-z]+,\ ([0-9]+)\ [a-z]+$ ]]; then
    p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
    if ((rc != 0 && f == 0)); then
      # Say why, when the stage said it (mutants: "N invalid, M stale").
      local why
      why=$(grep -E "^$name: [0-9]+ invalid, [0-9]+ stale" "$logs/$name.log" | tail -1 || true)
      f=1 note=" (exit $rc although no failure was counted${why:+: ${why#"$name: "}}: counted as 1 failure)"
    fi
  else
    p=0 f=1 note=" (exit $rc without a \"$name: N passed, M failed\" line: counted as 1 failure)"
  fi
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
  stages+=("$(printf '%-8s %s%s, %d s' "$name" "${line#"$name: "}" "$note" "$secs")")
  [[ -z "$note" ]] || echo "test: stage $name$note"
}
# start_stage NAME CMD...: runs CMD in the background, its output kept in
# $logs/NAME.log and shown by wait_stage NAME, which counts it as run_stage
# does. For a stage on the host's loopback (the control-plane suites) beside
# one whose time is mostly guests waiting under emulation: the two share the
# two cores instead of taking turns.
declare -A stage_pid=() stage_t0=()
start_stage() {
  local name=$1
  shift
  printf '\n==== %s: %s (in the background; its output when it is collected)\n' "$name" "$*"
  stage_t0[$name]=$SECONDS
  "$@" >"$logs/$name.log" 2>&1 &
  stage_pid[$name]=$!
}
wait_stage() { # NAME
  local name=$1 rc=0
  wait "${stage_pid[$name]}" || rc=$?
  printf '\n==== %s: collected (it ran in the background)\n' "$name"
  cat "$logs/$name.log"
  count_stage "$name" "$rc" $((SECONDS - ${stage_t0[$name]}))
}
skip_stage() { # NAME WHY
  printf '\n==== %s: SKIPPED (%s)\n' "$1" "$2"
  stages+=("$(printf '%-8s SKIPPED (%s): not counted' "$1" "$2")")
}

# ------------------------------------------------------------------ ctest

expected_skips=$(pwd)/tests/expected-skips.txt
# condition_holds NAME: the conditions of tests/expected-skips.txt.
condition_holds() {
  case "$1" in
    not-root) [[ $(id -u) -ne 0 ]] ;;
    no-loop-devices) [[ ! -e /dev/loop-control ]] ;;
    no-mount)
      local d rc=0
      d=$(mktemp -d)
      if mount -t tmpfs -o size=1m pillar-probe "$d" 2>/dev/null; then umount "$d"; rc=1; fi
      rmdir "$d"
      return "$rc"
      ;;
    *)
      echo "ctest: tests/expected-skips.txt: unknown condition \"$1\"" >&2
      return 1
      ;;
  esac
}

# expected_skip NAME OUTPUT: prints the matching entry when the skip of test
# NAME (its output OUTPUT) is expected on this machine.
expected_skip() {
  local name=$1 out=$2 line glob reason cond c
  while IFS= read -r line; do
    [[ -z "${line//[[:space:]]/}" || "$line" == \#* ]] && continue
    glob=${line%% | *} reason=${line#* | } cond=${reason#* | } reason=${reason%% | *}
    # shellcheck disable=SC2053 # the first field is a glob on purpose
    [[ "$name" == $glob && "$out" == *"$reason"* ]] || continue
    while IFS= read -r c; do
      if condition_holds "$c"; then
        echo "$glob | $reason | $c"
        return 0
      fi
    done < <(sed 's/ or /\n/g' <<<"$cond")
  done <"$expected_skips"
  return 1
}

ctest_stage() {
  local rc=0 name status passed=0 failed=0 expected=0 out why
  local -a skipped=() failures=()
  (cd "$build" && ctest --output-on-failure -j2 --timeout 600 --output-junit "$logs/ctest.xml") 2>&1 |
    tee "$logs/ctest-run.log" || rc=$?
  # One line per test: "  3/95 Test  #3: Suite.Name ......   Passed    0.01 sec"
  # (or "***Skipped", "***Failed", "***Exception: SegFault", "***Timeout", ...).
  # A parameterized test's name is followed by "  # GetParam() = ...", so the
  # status is what follows the last run of dots, not what follows the name.
  local re='^ *[0-9]+/[0-9]+ +Test +#[0-9]+: ([^ ]+) (.*[^ ]) +[0-9.]+ sec$' line total
  while IFS= read -r line; do
    [[ "$line" =~ $re ]] || continue
    name=${BASH_REMATCH[1]} status=${BASH_REMATCH[2]##*.}
    status=${status#"${status%%[!* ]*}"}
    case "$status" in
      Passed) passed=$((passed + 1)) ;;
      Skipped | "Not Run (Disabled)") skipped+=("$name") ;;
      *) failures+=("$name ($status)") ;;
    esac
  done <"$logs/ctest-run.log"
  failed=${#failures[@]}
  # Every test ctest ran must have been read above, or the parsing is wrong.
  total=$(sed -n 's/.* tests failed out of \([0-9][0-9]*\)$/\1/p' "$logs/ctest-run.log" | tail -1)
  if [[ -n "$total" ]] && ((passed + failed + ${#skipped[@]} != total)); then
    echo "ctest: read $((passed + failed + ${#skipped[@]})) results but ctest ran $total tests: counted as 1 failure"
    failed=$((failed + 1))
  fi
  for name in "${skipped[@]}"; do
    out=$(cd "$build" && ctest -V -R "^${name//./\\.}\$" 2>&1 || true)
    why=$(grep -A1 -E ': Skipped$' <<<"$out" | tail -1 | sed 's/^[0-9]*: //' || true)
    if entry=$(expected_skip "$name" "$out"); then
      echo "ctest: skipped as expected here: $name: \"$why\" (tests/expected-skips.txt: $entry)"
      expected=$((expected + 1))
    else
      echo "ctest: UNEXPECTED SKIP: $name: \"$why\" (not expected on this machine by tests/expected-skips.txt): counted as a failure"
      failed=$((failed + 1))
    fi
  done
  ((${#failures[@]} == 0)) || printf 'ctest: FAILED: %s\n' "${failures[@]}"
  if ((passed + failed + expected == 0)); then
    echo "ctest: no test result found (exit $rc)"
    failed=1
  elif ((rc != 0 && ${#failures[@]} == 0)); then
    echo "ctest: exit $rc, but no failed test was found in its output: counted as 1 failure"
    failed=$((failed + 1))
  fi
  ((expected == 0)) || echo "ctest: $expected skipped as expected on this machine (not counted as passed)"
  echo "ctest: $passed passed, $failed failed"
  ((failed == 0))
}

run_stage ctest ctest_stage
# The measured times the integration tests print ("figure: ... in 1.7 s").
if [[ -s "$logs/ctest.xml" ]]; then
  grep -ho 'figure: .* in [0-9.]* s$' "$logs/ctest.xml" | sed 's/&gt;/>/g; s/&lt;/</g; s/&amp;/\&/g; s/^/ctest /' >"$logs/figures.txt" || true
fi

# ------------------------------------------------------------------ mutants, fuzz, e2e

if [[ "${PILLAR_MUTANTS:-1}" == 1 ]]; then
  run_stage mutants ./scripts/mutants.sh --list short
else
  skip_stage mutants "PILLAR_MUTANTS=0"
fi
if [[ "${PILLAR_FUZZ:-1}" == 1 ]]; then
  run_stage fuzz ./scripts/fuzz.sh
else
  skip_stage fuzz "PILLAR_FUZZ=0"
fi
# The control-plane suites (host processes on loopback, no guest) run beside
# the guest stages smoke and e2e.
k8s_bg=0
if [[ "${PILLAR_K8S:-1}" == 1 && "${PILLAR_E2E:-1}" == 1 ]]; then
  start_stage k8s ./scripts/test-k8s.sh
  k8s_bg=1
fi
if [[ "${PILLAR_E2E:-1}" == 1 ]]; then
  run_stage smoke tests/e2e/smoke.sh
  run_stage e2e tests/e2e/scenarios.sh
  grep -h '^figure: ' "$logs/e2e.log" | sed 's/^/e2e /' >>"$logs/figures.txt" || true
else
  skip_stage smoke "PILLAR_E2E=0"
  skip_stage e2e "PILLAR_E2E=0"
fi
if [[ "${PILLAR_E2E:-1}" == 1 && "${PILLAR_SANITY:-1}" == 1 ]]; then
  run_stage csi-sanity ./scripts/csi-sanity.sh
  grep -h '^figure: ' "$logs/csi-sanity.log" | sed 's/^/csi-sanity /' >>"$logs/figures.txt" || true
else
  skip_stage csi-sanity "PILLAR_E2E=0 or PILLAR_SANITY=0"
fi
if ((k8s_bg)); then
  wait_stage k8s
  grep -h '^figure: ' "$logs/k8s.log" | sed 's/^/k8s /' >>"$logs/figures.txt" || true
elif [[ "${PILLAR_K8S:-1}" == 1 ]]; then
  run_stage k8s ./scripts/test-k8s.sh
  grep -h '^figure: ' "$logs/k8s.log" | sed 's/^/k8s /' >>"$logs/figures.txt" || true
else
  skip_stage k8s "PILLAR_K8S=0"
fi
if [[ "${PILLAR_IMAGES:-1}" == 1 ]]; then
  run_stage images env PILLAR_BUILD_DIR="$build" tests/images/test.sh --build
else
  skip_stage images "PILLAR_IMAGES=0"
fi

if [[ "${PILLAR_K8S_E2E:-1}" == 1 && "${PILLAR_E2E:-1}" == 1 ]]; then
  # The nodes, pillar installed with helm, the workloads' lives and a handful
  # of Kubernetes' external storage specs per protocol
  # (PILLAR_K8S_E2E_PILLAR=0: the nodes only; PILLAR_K8S_E2E_SUITE=0: no specs).
  run_stage k8s-e2e env PILLAR_BUILD_DIR="$build" PILLAR_K8S_E2E_PILLAR="${PILLAR_K8S_E2E_PILLAR:-1}" \
    ./scripts/test-k8s-e2e.sh
  grep -h '^figure: ' "$logs/k8s-e2e.log" | sed 's/^/k8s-e2e /' >>"$logs/figures.txt" || true
else
  skip_stage k8s-e2e "PILLAR_K8S_E2E=0 or PILLAR_E2E=0"
fi

if [[ -s "$logs/figures.txt" ]]; then
  echo
  echo "---- figures (measured, not limits)"
  cat "$logs/figures.txt"
fi
echo
echo "---- stages"
printf '%s\n' "${stages[@]}"
done_line=1
echo "test: $total_pass passed, $total_fail failed"
((total_fail == 0))
