#!/usr/bin/env bash
# Snapshot, restore, clone and detached-copy latency and space, per backend
# (the file pool, lvm-thin, live ZFS), at 1 GiB and 10 GiB, on real kernels:
# the e2e harness's guests (tests/e2e/scenarios.sh), its scenario "b1"
# (bench/snapshots_e2e.sh). Prints "figure: ..." lines and the harness's
# closing line.
#   bench/snapshots.sh                 # every pool
#   bench/snapshots.sh b1@zfs          # one pool (b1: the file pool)
#   BENCH_DATA_MIB=64 bench/snapshots.sh   # data written per volume (default 128)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
only="${*:-b1 b1@zfs b1@lvm-thin}"
E2E_ONLY="$only" exec "$root/tests/e2e/scenarios.sh"
