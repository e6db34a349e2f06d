#!/usr/bin/env bash
# Installs, from Debian 12's repository, exactly the packages pillar's build
# and tests need that this machine lacks. Safe to run again.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libyaml-cpp-dev libsqlite3-dev sqlite3 libspdlog-dev libfmt-dev libcli11-dev libssl-dev openssl
  libcurl4-openssl-dev  # the Kubernetes API client
  prometheus-cpp-dev    # /metrics on every daemon (prometheus-cpp core and pull)
  libmount-dev          # the node plugin reads /proc/self/mountinfo with libmount
  jq                    # seed 001's runbook, run as written by tests/k8s/suites/k8s-runbook.sh
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev clang-format clang-tidy
  util-linux e2fsprogs xfsprogs
  nfs-kernel-server   # exportfs: the agent's NFS integration tests use the real export table
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: nothing missing"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then echo "$0: run as root (it installs packages and drives loop devices)" >&2; exit 1; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
