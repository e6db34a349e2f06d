#!/usr/bin/env bash
# Self-test of the VM harness itself (lib.sh): 3 guests on one segment,
# vm_exec semantics (argv quoting, rc, stdin, env, cwd, timeout), background
# requests, copy in/out, vm_set_ip, data disks, restart with kept disks.
#
#   tests/e2e/selftest.sh
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PASSED=0
FAILED=0
ok() {
  local name="$1"
  shift
  if "$@"; then
    echo "PASS: $name"
    PASSED=$((PASSED + 1))
  else
    echo "FAIL: $name"
    FAILED=$((FAILED + 1))
  fi
}

t_quoting() {
  local out
  out="$(vm_exec storage printf '<%s>' 'a b' '$(x)' "it's" '' '*' $'new\nline')"
  [[ "$out" == "<a b><\$(x)><it's><><*><new"$'\n'"line>" ]]
}
t_rc() {
  local rc=0
  vm_exec storage sh -c 'echo out; echo err >&2; exit 7' >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 7 ]]
}
t_stderr() { [[ "$(vm_exec storage sh -c 'echo err >&2' 2>&1 >/dev/null)" == err ]]; }
t_stdin() { [[ "$(printf 'x\ny\n' | vm_exec storage --stdin - wc -l)" == 2 ]]; }
t_env_cwd() { [[ "$(vm_exec storage --env FOO='a b' --cwd /tmp sh -c 'echo "$FOO $PWD"')" == "a b /tmp" ]]; }
t_timeout() {
  local rc=0
  vm_exec storage --timeout 2 sleep 30 2>/dev/null || rc=$?
  [[ $rc -eq 124 ]]
}
t_bg() {
  local id rc=0
  id="$(vm_exec_bg storage sh -c 'echo started; sleep 60')"
  sleep 1
  vm_bg_running storage "$id" && [[ "$(vm_bg_log storage "$id")" == started ]] || return 1
  vm_kill_req storage "$id"
  vm_bg_wait storage "$id" 10 >/dev/null || rc=$?
  [[ $rc -eq 137 ]]
}
t_parallel() {
  local a b
  a="$(vm_exec_bg storage sh -c 'sleep 1; echo a')"
  b="$(vm_exec_bg consumer-a sh -c 'sleep 1; echo b')"
  [[ "$(vm_bg_wait storage "$a")$(vm_bg_wait consumer-a "$b")" == ab ]]
}
t_network() {
  vm_exec consumer-a ping -c 1 -W 3 10.99.0.12 >/dev/null &&
    vm_exec consumer-b ping -c 1 -W 3 10.99.0.1 >/dev/null
}
t_set_ip() {
  vm_set_ip consumer-b eth0 10.99.0.22/24 &&
    vm_exec consumer-a ping -c 1 -W 3 10.99.0.22 >/dev/null &&
    [[ "$(vm_ip consumer-b)" == 10.99.0.22 ]]
}
t_copy() {
  local tmp
  tmp="$(mktemp -d)"
  echo hello >"$tmp/in.txt"
  vm_copy_in storage "$tmp/in.txt" /root/x &&
    vm_exec storage sh -c 'mkdir -p /tmp/res && cp /root/x/in.txt /tmp/res/out.txt' &&
    vm_copy_out storage /tmp/res "$tmp/back" &&
    [[ "$(cat "$tmp/back/res/out.txt")" == hello ]]
  local rc=$?
  rm -rf "$tmp"
  return "$rc"
}
t_identity() {
  [[ "$(vm_hostnqn consumer-a)" == "nqn.2014-08.org.nvmexpress:uuid:$(vm_uuid consumer-a)" ]] &&
    [[ "$(vm_iqn consumer-a)" == iqn.2004-10.org.debian:pillar-e2e:consumer-a ]] &&
    [[ "$(vm_hostnqn consumer-a)" != "$(vm_hostnqn consumer-b)" ]]
}
t_data_disk() { [[ "$(vm_exec storage readlink -f /dev/disk/by-id/virtio-pillar-data1)" == /dev/vd? ]]; }
t_src_share() { vm_exec storage test -r "$E2E_DIR/selftest.sh"; }
t_restart() {
  local before after
  before="$(vm_exec storage cat /proc/sys/kernel/random/boot_id)"
  vm_exec storage sh -c 'echo kept >/var/tmp/marker'
  vm_restart storage
  after="$(vm_exec storage cat /proc/sys/kernel/random/boot_id)"
  [[ "$before" != "$after" && "$(vm_exec storage cat /var/tmp/marker)" == kept ]]
}

main() {
  vm_start storage --ip 10.99.0.1/24 --disk 1G
  vm_start consumer-a --ip 10.99.0.11/24
  vm_start consumer-b --ip 10.99.0.12/24
  vm_wait_ready storage
  vm_wait_ready consumer-a
  vm_wait_ready consumer-b
  local t
  t=$(e2e__now)
  vm_exec storage true
  e2e_log "vm_exec true: $(e2e__ms_since "$t") ms"
  ok quoting t_quoting
  ok exit-code t_rc
  ok stderr t_stderr
  ok stdin t_stdin
  ok env-cwd t_env_cwd
  ok timeout t_timeout
  ok background t_bg
  ok parallel t_parallel
  ok network t_network
  ok set-ip t_set_ip
  ok copy t_copy
  ok identity t_identity
  ok data-disk t_data_disk
  ok src-share t_src_share
  ok restart t_restart
  echo "selftest: $PASSED passed, $FAILED failed"
  [[ $FAILED -eq 0 ]]
}

main "$@"
