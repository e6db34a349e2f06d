# shellcheck shell=bash
# What every Kubernetes suite shares. Source lib.sh and pillar.sh first, then
#   suite_begin NAME [LOG-GLOB...]
# which makes a fresh work dir W and defines:
#   ok TEXT / fail TEXT [DETAIL]   count one check
#   finish                         prints the LOG-GLOBs (under W/logs) when a
#                                  check failed, stops pillar's daemons and
#                                  the control plane, removes W when all
#                                  passed, prints "NAME: N passed, M failed"
#                                  and exits with the verdict
#   kubectl ARGS...                the built kubectl with the harness's
#                                  kubeconfig (after k8s_up)
#   now_ms, since T0_MS            milliseconds now; seconds since, one decimal
#   wait_for SECONDS CMD...        until CMD succeeds (0.2 s steps); prints
#                                  the seconds it took, fails after SECONDS
# A suite may define suite_cleanup, run by finish before the daemons stop.

suite_begin() {
  SUITE_NAME=$1
  shift
  SUITE_LOGS=("$@")
  SUITE_T0=$SECONDS
  passed=0 failed=0
  W=$(mktemp -d "${TMPDIR:-/tmp}/pillar-$SUITE_NAME.XXXXXX")
}

ok() { passed=$((passed + 1)); echo "ok   - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1${2:+: $2}"; }

finish() {
  local g f
  if ((failed > 0)); then
    for g in "${SUITE_LOGS[@]}"; do
      for f in "$W"/logs/$g; do
        [[ -s $f ]] && { echo "---- $(basename "$f") (last 25 lines)"; tail -25 "$f"; }
      done
    done
  fi
  if declare -F suite_cleanup >/dev/null; then suite_cleanup; fi
  pillar_down "$W"
  k8s_down "$W"
  ((failed > 0)) || rm -rf "$W"
  echo "$SUITE_NAME: took $((SECONDS - SUITE_T0)) s"
  echo "$SUITE_NAME: $passed passed, $failed failed"
  ((failed == 0))
  exit
}

kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$K8S_KUBECONFIG" "$@"; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }
since() {
  local d=$(($(now_ms) - $1))
  printf '%d.%d\n' $((d / 1000)) $((d % 1000 / 100))
}
wait_for() {
  local limit=$1 t0
  shift
  t0=$(now_ms)
  until "$@" >/dev/null 2>&1; do
    (($(now_ms) - t0 > limit * 1000)) && return 1
    sleep 0.2
  done
  since "$t0"
}
