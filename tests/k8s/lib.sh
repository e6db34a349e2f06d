# shellcheck shell=bash
# A real Kubernetes control plane on loopback for pillar's tests: etcd,
# kube-apiserver and (on request) kube-controller-manager, built by
# build-tools.sh. Source this file from bash, then:
#
#   k8s_tools                               build or find the binaries, export K8S_BIN
#   k8s_up <workdir>                        etcd + kube-apiserver, waits for /readyz
#   k8s_start_controller_manager <workdir>  kube-controller-manager, waits for /healthz
#   k8s_snapshot_crds <workdir> <crd-file>...  the VolumeSnapshot CRDs, Established
#   k8s_start_snapshot_controller <workdir> <binary> <crd-file>...
#                                           those CRDs, then snapshot-controller
#   k8s_kubectl <args...>                   the built kubectl with the admin kubeconfig
#   k8s_down <workdir>                      stops everything started for <workdir>
#
# k8s_up exports K8S_KUBECONFIG, K8S_SERVER (https://127.0.0.1:PORT), K8S_CA,
# K8S_BIN, K8S_CLIENT_CERT, K8S_CLIENT_KEY, K8S_ETCD, K8S_SA_ISSUER,
# K8S_WORKDIR, and writes the same as shell assignments to <workdir>/env.
#
# Lifetime: the daemons belong to the shell that called k8s_up. k8s_up chains
# an EXIT trap that runs k8s_down (keeping any EXIT trap already set), makes
# INT/TERM exit (when they have no trap of their own) so that trap runs, and
# starts every daemon with a parent-death signal (setpriv --pdeathsig KILL) so
# even a SIGKILLed test shell leaves nothing running. (KILL, not TERM: with
# TERM, etcd stops at once and kube-apiserver's graceful shutdown then hangs
# without etcd, until a second signal.) k8s_down is the graceful path.
# So call k8s_up in the test's own shell, not inside $(...) or a pipeline,
# whose subshell ends at once.
#
# Every address is 127.0.0.1; every port is picked free at start (below the
# kernel's ephemeral range so an outgoing connection cannot take it first).
# Logs: <workdir>/logs/*.log; on a failure the last 40 lines of each are printed.
#
# Knobs: K8S_BIN (use these binaries; otherwise build-tools.sh is run),
# K8S_APISERVER_ARGS (more kube-apiserver flags, split on spaces, e.g.
# --watch-cache=false so watches read etcd and see its compaction),
# K8S_READY_TIMEOUT (seconds, default 120), K8S_SERVICE_CIDR (default
# 127.0.100.0/24: bookkeeping only, nothing routes to it), PILLAR_K8S_TOOLS_CACHE,
# K8S_API_ADDRESS and K8S_API_PORT (kube-apiserver's advertised address and
# port, default 127.0.0.1 and a free port; with another address it binds
# 0.0.0.0 and its certificate names it too: only inside a network namespace
# the test made), K8S_API_SANS (more subjectAltName entries, e.g. IP:10.96.0.1),
# K8S_AUTHORIZATION_MODE (default RBAC).

_K8S_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_K8S_UP_DIRS=()
_K8S_TRAP_SET=""
_K8S_PREV_EXIT_TRAP=""

_k8s_log() { printf 'k8s: %s\n' "$*" >&2; }

_k8s_now() { echo "${EPOCHREALTIME/,/.}"; }
_k8s_since() { awk -v a="$1" -v b="$(_k8s_now)" 'BEGIN { printf "%.1f", b - a }'; }

# k8s_tools: make sure the binaries exist, export K8S_BIN.
k8s_tools() {
  if [[ -n ${K8S_BIN:-} ]]; then
    local b
    for b in etcd kube-apiserver kube-controller-manager kubectl; do
      [[ -x $K8S_BIN/$b ]] || { _k8s_log "K8S_BIN=$K8S_BIN has no $b"; return 1; }
    done
    export K8S_BIN
    return 0
  fi
  local out
  out=$("$_K8S_LIB_DIR/build-tools.sh") || { _k8s_log "build-tools.sh failed"; return 1; }
  K8S_BIN=${out##*$'\n'}
  export K8S_BIN
}

# _k8s_free_ports N: N distinct free TCP ports on 127.0.0.1, space separated.
_k8s_free_ports() {
  python3 - "$1" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except OSError:
    lo = 32768
cands = list(range(10000, max(lo, 10000 + 4 * n)))
random.shuffle(cands)
held, ports = [], []
for p in cands:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close()
        continue
    held.append(s)
    ports.append(p)
    if len(ports) == n:
        break
if len(ports) < n:
    sys.exit("no free ports")
print(*ports)
EOF
}

_k8s_dump_logs() {
  local f
  for f in "$1"/logs/*.log; do
    [[ -e $f ]] || continue
    printf '\n===== last 40 lines of %s =====\n' "$f" >&2
    tail -n 40 "$f" >&2
  done
}

# _k8s_alive PID: running and not a zombie.
_k8s_alive() {
  local st
  st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $st && $st != Z && $st != X ]]
}

# _k8s_ours PIDFILE: the pid in it is alive and still runs the binary recorded
# beside it (so a reused pid is never signalled). setpriv counts too: it is the
# daemon for the instant before it execs it.
_k8s_ours() {
  local pid exe want
  pid=$(cat "$1" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && _k8s_alive "$pid" || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  exe=${exe% (deleted)}
  want=$(cat "$1.exe" 2>/dev/null) || return 1
  [[ $exe == "$want" || $exe == "$(command -v setpriv 2>/dev/null)" ]]
}

# _k8s_start WORKDIR NAME BINARY ARGS...: start a daemon in the background.
_k8s_start() {
  local w=$1 name=$2 bin=$3
  shift 3
  local log=$w/logs/$name.log
  local -a pd=()
  if command -v setpriv >/dev/null && setpriv --help 2>&1 | grep -q pdeathsig; then
    pd=(setpriv --pdeathsig KILL --)
  fi
  printf '%s\n' "$(date -Is) starting: $bin $*" >"$log"
  "${pd[@]}" "$bin" "$@" >>"$log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$w/run/$name.pid"
  readlink -f "$bin" >"$w/run/$name.pid.exe"
}

_k8s_stop_one() {
  local pidfile=$1 pid i
  pid=$(cat "$pidfile" 2>/dev/null) || return 0
  if _k8s_ours "$pidfile"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do   # 15 s, then KILL
      _k8s_alive "$pid" || break
      sleep 0.1
    done
    if _k8s_alive "$pid"; then
      _k8s_log "$(basename "$pidfile" .pid) (pid $pid) ignored TERM for 15 s, killing"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do _k8s_alive "$pid" || break; sleep 0.1; done
    fi
  fi
  wait "$pid" 2>/dev/null || true   # reap if it is our child
  rm -f "$pidfile" "$pidfile.exe"
}

# k8s_down WORKDIR: stop snapshot-controller, the controller manager,
# apiserver and etcd of WORKDIR. Safe to call more than once and from another
# shell; leaves the logs.
k8s_down() {
  local w=${1:?usage: k8s_down <workdir>}
  [[ -d $w/run ]] || return 0
  local n
  for n in snapshot-controller kube-controller-manager kube-apiserver etcd; do
    _k8s_stop_one "$w/run/$n.pid"
  done
  local d keep=()
  for d in "${_K8S_UP_DIRS[@]}"; do [[ $d == "$(cd "$w" && pwd)" ]] || keep+=("$d"); done
  _K8S_UP_DIRS=("${keep[@]}")
}

_k8s_on_exit() {
  local rc=$? d
  for d in "${_K8S_UP_DIRS[@]}"; do k8s_down "$d"; done
  if [[ -n $_K8S_PREV_EXIT_TRAP ]]; then
    (exit "$rc")   # let the previous trap see the exit status in $?
    eval "$_K8S_PREV_EXIT_TRAP"
  fi
}

_k8s_install_trap() {
  [[ -n $_K8S_TRAP_SET ]] && return 0
  local -a words
  eval "words=($(trap -p EXIT))"
  _K8S_PREV_EXIT_TRAP=${words[2]:-}
  trap _k8s_on_exit EXIT
  [[ -n $(trap -p INT) ]] || trap 'exit 130' INT
  [[ -n $(trap -p TERM) ]] || trap 'exit 143' TERM
  _K8S_TRAP_SET=1
}

_k8s_pki() {
  local p=$1/pki
  mkdir -p "$p"
  cat >"$p/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[v3_server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc@EXTRA_SANS@
authorityKeyIdentifier = keyid
[v3_client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
EOF
  local extra=""
  [[ -z ${K8S_API_ADDRESS:-} || ${K8S_API_ADDRESS} == 127.0.0.1 ]] || extra+=", IP:$K8S_API_ADDRESS"
  [[ -z ${K8S_API_SANS:-} ]] || extra+=", ${K8S_API_SANS// /, }"
  sed -i "s/@EXTRA_SANS@/$extra/" "$p/openssl.cnf"
  (
    set -e
    cd "$p"
    ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
    sign() { # name subject extensions
      openssl req -new -config openssl.cnf -key "$1.key" -subj "$2" -out "$1.csr"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" \
        -days 3650 -extfile openssl.cnf -extensions "$3" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr"
    }
    ec ca.key
    openssl req -x509 -new -config openssl.cnf -extensions v3_ca -key ca.key \
      -subj "/CN=pillar-test-ca" -days 3650 -out ca.crt
    ec server.key; sign server "/CN=kube-apiserver" v3_server
    ec admin.key;  sign admin "/O=system:masters/CN=pillar-test-admin" v3_client
    # Front-proxy (request header) CA and the apiserver's proxy client cert, as
    # in a real cluster: delegated authentication (kube-controller-manager,
    # aggregated APIs) finds a complete extension-apiserver-authentication.
    ec front-proxy-ca.key
    openssl req -x509 -new -config openssl.cnf -extensions v3_ca -key front-proxy-ca.key \
      -subj "/CN=pillar-test-front-proxy-ca" -days 3650 -out front-proxy-ca.crt
    ec front-proxy-client.key
    openssl req -new -config openssl.cnf -key front-proxy-client.key -subj "/CN=front-proxy-client" -out fp.csr
    openssl x509 -req -in fp.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key \
      -set_serial "0x$(openssl rand -hex 16)" -days 3650 -extfile openssl.cnf -extensions v3_client \
      -out front-proxy-client.crt 2>/dev/null
    rm -f fp.csr
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub
    chmod 600 ./*.key
  ) || { _k8s_log "openssl failed making the test PKI in $p"; return 1; }
}

_k8s_kubeconfig() { # workdir server
  cat >"$1/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: pillar-test
  cluster:
    server: $2
    certificate-authority: $1/pki/ca.crt
users:
- name: pillar-test-admin
  user:
    client-certificate: $1/pki/admin.crt
    client-key: $1/pki/admin.key
contexts:
- name: pillar-test
  context:
    cluster: pillar-test
    user: pillar-test-admin
current-context: pillar-test
EOF
  chmod 600 "$1/kubeconfig"
}

# _k8s_wait_url WORKDIR NAME URL TIMEOUT REGEX PIDNAME...: poll until the body
# of URL matches REGEX; fail early if a listed daemon has exited.
_k8s_wait_url() {
  local w=$1 name=$2 url=$3 timeout=$4 want=$5
  shift 5
  local start deadline body p
  start=$(_k8s_now)
  deadline=$(( ${start%.*} + timeout ))
  while :; do
    body=$(curl --noproxy '*' -sS --max-time 5 --cacert "$w/pki/ca.crt" \
      --cert "$w/pki/admin.crt" --key "$w/pki/admin.key" "$url" 2>/dev/null) || true
    [[ $body =~ $want ]] && return 0
    for p in "$@"; do
      if ! _k8s_ours "$w/run/$p.pid"; then
        _k8s_log "$p exited while waiting for $name"
        return 1
      fi
    done
    if (( $(date +%s) >= deadline )); then
      _k8s_log "$name not ready after $timeout s (last answer: ${body:-none})"
      return 1
    fi
    sleep 0.2
  done
}

_k8s_fail() { # workdir message
  _k8s_log "$2"
  _k8s_dump_logs "$1"
  k8s_down "$1"
  return 1
}

# k8s_up WORKDIR: etcd + kube-apiserver on loopback; returns when /readyz is ok.
k8s_up() {
  local w=${1:?usage: k8s_up <workdir>}
  mkdir -p "$w" && w=$(cd "$w" && pwd) || return 1
  if _k8s_ours "$w/run/kube-apiserver.pid" || _k8s_ours "$w/run/etcd.pid"; then
    _k8s_log "a control plane is already running for $w"
    return 1
  fi
  k8s_tools || return 1
  command -v openssl >/dev/null || { _k8s_log "openssl is required"; return 1; }
  command -v curl >/dev/null || { _k8s_log "curl is required"; return 1; }
  command -v python3 >/dev/null || { _k8s_log "python3 is required (free ports)"; return 1; }
  mkdir -p "$w/logs" "$w/run"
  _K8S_UP_DIRS+=("$w")
  _k8s_install_trap

  local t0 ports etcd_port peer_port api_port
  t0=$(_k8s_now)
  _k8s_pki "$w" || { _k8s_fail "$w" "PKI generation failed"; return 1; }
  ports=$(_k8s_free_ports 3) || { _k8s_fail "$w" "no free ports"; return 1; }
  read -r etcd_port peer_port api_port <<<"$ports"
  api_port=${K8S_API_PORT:-$api_port}
  local api_addr=${K8S_API_ADDRESS:-127.0.0.1} bind=127.0.0.1
  [[ $api_addr == 127.0.0.1 ]] || bind=0.0.0.0
  local server=https://$api_addr:$api_port etcd=http://127.0.0.1:$etcd_port
  _k8s_kubeconfig "$w" "$server"

  # etcd: single member, disposable data, so fsync is skipped for speed.
  _k8s_start "$w" etcd "$K8S_BIN/etcd" \
    --name=pillar-test \
    --data-dir="$w/etcd-data" \
    --listen-client-urls="$etcd" \
    --advertise-client-urls="$etcd" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="pillar-test=http://127.0.0.1:$peer_port" \
    --initial-cluster-state=new \
    --unsafe-no-fsync=true
  local te=$(_k8s_now)
  _k8s_wait_url "$w" etcd "$etcd/health" 60 '"health": *"true"' etcd ||
    { _k8s_fail "$w" "etcd did not become healthy"; return 1; }
  local etcd_s
  etcd_s=$(_k8s_since "$te")

  local ta=$(_k8s_now)
  _k8s_start "$w" kube-apiserver "$K8S_BIN/kube-apiserver" \
    --etcd-servers="$etcd" \
    --bind-address="$bind" \
    --advertise-address="$api_addr" \
    --secure-port="$api_port" \
    --cert-dir="$w/apiserver-certs" \
    --tls-cert-file="$w/pki/server.crt" \
    --tls-private-key-file="$w/pki/server.key" \
    --client-ca-file="$w/pki/ca.crt" \
    --requestheader-client-ca-file="$w/pki/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$w/pki/front-proxy-client.crt" \
    --proxy-client-key-file="$w/pki/front-proxy-client.key" \
    --authorization-mode="${K8S_AUTHORIZATION_MODE:-RBAC}" \
    --service-account-issuer="$server" \
    --service-account-key-file="$w/pki/sa.pub" \
    --service-account-signing-key-file="$w/pki/sa.key" \
    --api-audiences="$server" \
    --service-cluster-ip-range="${K8S_SERVICE_CIDR:-127.0.100.0/24}" \
    --endpoint-reconciler-type=none \
    --profiling=false \
    ${K8S_APISERVER_ARGS:-}
  _k8s_wait_url "$w" kube-apiserver "$server/readyz" "${K8S_READY_TIMEOUT:-120}" '^ok$' etcd kube-apiserver ||
    { _k8s_fail "$w" "kube-apiserver did not become ready"; return 1; }
  local api_s
  api_s=$(_k8s_since "$ta")

  export K8S_WORKDIR=$w K8S_KUBECONFIG=$w/kubeconfig K8S_SERVER=$server K8S_CA=$w/pki/ca.crt \
    K8S_CLIENT_CERT=$w/pki/admin.crt K8S_CLIENT_KEY=$w/pki/admin.key K8S_ETCD=$etcd \
    K8S_SA_ISSUER=$server K8S_BIN
  {
    local v
    for v in K8S_WORKDIR K8S_KUBECONFIG K8S_SERVER K8S_CA K8S_CLIENT_CERT K8S_CLIENT_KEY K8S_ETCD K8S_SA_ISSUER K8S_BIN; do
      printf '%s=%q\n' "$v" "${!v}"
    done
  } >"$w/env"
  _k8s_log "etcd healthy in ${etcd_s}s; kube-apiserver ready in ${api_s}s (start-to-ready); total $(_k8s_since "$t0")s; $server"
}

# k8s_start_controller_manager WORKDIR: kube-controller-manager against the
# apiserver of WORKDIR (after k8s_up); returns when /healthz is ok.
# K8S_KCM_EXTRA_ARGS: more flags, split on blanks (a benchmark's API rate).
k8s_start_controller_manager() {
  local w=${1:?usage: k8s_start_controller_manager <workdir>}
  local -a extra=()
  read -r -a extra <<<"${K8S_KCM_EXTRA_ARGS:-}"
  w=$(cd "$w" && pwd) || return 1
  _k8s_ours "$w/run/kube-apiserver.pid" || { _k8s_log "no kube-apiserver running for $w (call k8s_up first)"; return 1; }
  if _k8s_ours "$w/run/kube-controller-manager.pid"; then
    _k8s_log "kube-controller-manager already running for $w"
    return 0
  fi
  local port t0
  port=$(_k8s_free_ports 1) || return 1
  t0=$(_k8s_now)
  _k8s_start "$w" kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$w/kubeconfig" \
    --authentication-kubeconfig="$w/kubeconfig" \
    --authorization-kubeconfig="$w/kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="$port" \
    --cert-dir="$w/kcm-certs" \
    --tls-cert-file="$w/pki/server.crt" \
    --tls-private-key-file="$w/pki/server.key" \
    --leader-elect=false \
    --use-service-account-credentials=false \
    --root-ca-file="$w/pki/ca.crt" \
    --service-account-private-key-file="$w/pki/sa.key" \
    --profiling=false "${extra[@]}"
  _k8s_wait_url "$w" kube-controller-manager "https://127.0.0.1:$port/healthz" 60 '^ok$' kube-controller-manager ||
    { _k8s_log "kube-controller-manager did not become healthy"; _k8s_dump_logs "$w"; return 1; }
  export K8S_KCM_HEALTHZ=https://127.0.0.1:$port/healthz
  printf 'K8S_KCM_HEALTHZ=%q\n' "$K8S_KCM_HEALTHZ" >>"$w/env"
  _k8s_log "kube-controller-manager healthy in $(_k8s_since "$t0")s"
}

# k8s_snapshot_crds WORKDIR CRD-FILE...: the VolumeSnapshot CRDs (the files
# of tests/k8s/snapshot-crds.sh) applied server-side to the apiserver of
# WORKDIR; returns once each is Established.
k8s_snapshot_crds() {
  local w=${1:?usage: k8s_snapshot_crds <workdir> <crd-file>...} f files=()
  shift
  (($# > 0)) || { _k8s_log "k8s_snapshot_crds: no CRD file given"; return 1; }
  for f in "$@"; do files+=(-f "$f"); done
  local kc=("$K8S_BIN/kubectl" --kubeconfig="$w/kubeconfig" --request-timeout=60s)
  if ! "${kc[@]}" apply --server-side --field-manager=pillar-test "${files[@]}" >"$w/logs/snapshot-crds.log" 2>&1 ||
    ! "${kc[@]}" wait --for=condition=Established --timeout=60s "${files[@]}" >>"$w/logs/snapshot-crds.log" 2>&1; then
    _k8s_log "the VolumeSnapshot CRDs were not established: $(tail -n 3 "$w/logs/snapshot-crds.log")"
    return 1
  fi
}

# k8s_start_snapshot_controller WORKDIR BINARY CRD-FILE...: k8s_snapshot_crds,
# then external-snapshotter's snapshot-controller (BINARY, from
# build-csi-tools.sh) against the apiserver of WORKDIR (after k8s_up), on the
# host like kube-controller-manager, with the admin kubeconfig. Returns once
# its controller started (past its own check that the CRDs serve). Group
# snapshots are off: pillar offers none, and the controller would wait 30 s
# for their CRDs first. Failed creates and deletes are retried within 30 s
# (not the default 5 min), so a test does not wait on a long backoff.
k8s_start_snapshot_controller() {
  local w=${1:?usage: k8s_start_snapshot_controller <workdir> <binary> <crd-file>...} bin=${2:?binary}
  shift 2
  w=$(cd "$w" && pwd) || return 1
  _k8s_ours "$w/run/kube-apiserver.pid" || { _k8s_log "no kube-apiserver running for $w (call k8s_up first)"; return 1; }
  if _k8s_ours "$w/run/snapshot-controller.pid"; then
    _k8s_log "snapshot-controller already running for $w"
    return 0
  fi
  local t0 i
  t0=$(_k8s_now)
  k8s_snapshot_crds "$w" "$@" || return 1
  _k8s_start "$w" snapshot-controller "$bin" --kubeconfig="$w/kubeconfig" --leader-election=false \
    --feature-gates=CSIVolumeGroupSnapshot=false --retry-interval-max=30s --v=2
  for ((i = 0; i < 600; i++)); do   # 60 s
    if grep -q 'Starting snapshot controller' "$w/logs/snapshot-controller.log"; then
      _k8s_log "VolumeSnapshot CRDs established and snapshot-controller started in $(_k8s_since "$t0")s"
      return 0
    fi
    _k8s_ours "$w/run/snapshot-controller.pid" || break
    sleep 0.1
  done
  _k8s_log "snapshot-controller did not start its controller: $(tail -n 5 "$w/logs/snapshot-controller.log")"
  _k8s_stop_one "$w/run/snapshot-controller.pid"
  return 1
}

# k8s_kubectl ARGS...: the built kubectl with the admin kubeconfig of the last
# k8s_up, its discovery cache in the work dir (not ~/.kube).
k8s_kubectl() {
  "${K8S_BIN:?call k8s_up first}/kubectl" --kubeconfig="${K8S_KUBECONFIG:?call k8s_up first}" \
    --cache-dir="${K8S_WORKDIR:?call k8s_up first}/kubectl-cache" "$@"
}
