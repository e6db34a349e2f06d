#!/usr/bin/env bash
# Mutation check of pillar's safety guards (tests/mutants.txt; the format is
# described at the top of that file). For each selected entry: replace the
# guarded expression with its mutation in a scratch copy of the tree, rebuild
# only the test targets that run the named tests, run them, put the file back.
# A mutant is KILLED when a named test fails (or times out) and SURVIVED when
# they all pass: a guard no test would miss. A mutant that does not compile
# is INVALID, and an entry whose expression is not found exactly once, or
# whose test regex matches no test, is STALE: both are failures of the list.
#
#   scripts/mutants.sh --list short     # entries tagged "ci" (what scripts/test.sh runs)
#   scripts/mutants.sh --list full      # every entry except the pending ones
#   scripts/mutants.sh --list pending   # only the pending entries (known survivors)
#   scripts/mutants.sh --only ID[,ID..] # these entries, whatever their tags
#   scripts/mutants.sh --check          # only check the list (staleness), build nothing
#
# Ends with "mutants: N killed, M survived"; exit != 0 on any survivor,
# invalid or stale entry, or when the named tests fail on the unmutated tree.
#
# The scratch copy: ${PILLAR_MUTANTS_DIR:-/var/tmp/pillar-mutants}/<key>/tree,
# the key derived from this tree's path, refreshed from the working tree
# (tracked and untracked-but-not-ignored files, like scripts/lint.sh) on
# every run; its build directory tree/build is kept between runs and built
# with ccache, so a run rebuilds only what changed. Your tree is never touched.
set -euo pipefail
shopt -u patsub_replacement 2>/dev/null || true
cd "$(dirname "$0")/.."
root=$(pwd)
list=short only="" check_only=0
while (($#)); do
  case "$1" in
    --list) list="${2:-}"; shift 2 ;;
    --list=*) list="${1#--list=}"; shift ;;
    --only) only="${2:-}"; shift 2 ;;
    --only=*) only="${1#--only=}"; shift ;;
    --check) check_only=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "mutants.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$list" in
  short | full | pending) ;;
  *) echo "mutants.sh: --list must be short, full or pending, not \"$list\"" >&2; exit 2 ;;
esac
listfile=${PILLAR_MUTANTS_LIST:-tests/mutants.txt}
jobs=${PILLAR_JOBS:-2}
t_start=$(date +%s)

# ------------------------------------------------------------------ the list

ids=()
declare -A F_FILE F_FIND F_REPLACE F_TESTS F_TAGS F_LINE
# An entry is a block of "key: value" lines; blank lines separate entries;
# "#" starts a comment line. find+/replace+ continue the value on a new line.
parse_list() {
  local n=0 line key value cur=""
  local -A seen=()
  finish() {
    [[ -n "$cur" ]] || return 0
    local k
    for k in file find replace tests tags; do
      local -n ref="F_${k^^}"
      if [[ -z "${ref[$cur]+x}" ]]; then
        echo "mutants.sh: $listfile:${F_LINE[$cur]}: entry $cur has no \"$k:\"" >&2
        exit 2
      fi
    done
    cur=""
  }
  while IFS= read -r line || [[ -n "$line" ]]; do
    n=$((n + 1))
    [[ "$line" == \#* ]] && continue
    if [[ -z "${line//[[:space:]]/}" ]]; then
      finish
      continue
    fi
    if [[ ! "$line" =~ ^([a-z+]+):\ ?(.*)$ ]]; then
      echo "mutants.sh: $listfile:$n: not a \"key: value\" line: $line" >&2
      exit 2
    fi
    key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
    if [[ "$key" == id ]]; then
      finish
      [[ "$value" =~ ^[a-z0-9][a-z0-9-]*$ ]] || { echo "mutants.sh: $listfile:$n: bad id \"$value\"" >&2; exit 2; }
      [[ -z "${seen[$value]+x}" ]] || { echo "mutants.sh: $listfile:$n: id $value twice" >&2; exit 2; }
      seen[$value]=1
      cur=$value
      ids+=("$cur")
      F_LINE[$cur]=$n
      continue
    fi
    [[ -n "$cur" ]] || { echo "mutants.sh: $listfile:$n: \"$key:\" before any \"id:\"" >&2; exit 2; }
    case "$key" in
      file) F_FILE[$cur]=$value ;;
      find) F_FIND[$cur]=$value ;;
      find+) F_FIND[$cur]+=$'\n'$value ;;
      replace) F_REPLACE[$cur]=$value ;;
      replace+) F_REPLACE[$cur]+=$'\n'$value ;;
      tests) F_TESTS[$cur]=$value ;;
      tags) F_TAGS[$cur]=" $value " ;;
      why) ;;
      *) echo "mutants.sh: $listfile:$n: unknown key \"$key\"" >&2; exit 2 ;;
    esac
  done <"$listfile"
  finish
}
parse_list
((${#ids[@]})) || { echo "mutants.sh: $listfile has no entry" >&2; exit 2; }

is_pending() { [[ "${F_TAGS[$1]}" == *" pending "* ]]; }
selected=() pending=()
declare -A wanted=()
if [[ -n "$only" ]]; then
  for id in ${only//,/ }; do
    [[ -n "${F_FILE[$id]+x}" ]] || { echo "mutants.sh: --only: no entry $id in $listfile" >&2; exit 2; }
    wanted[$id]=1
  done
fi
for id in "${ids[@]}"; do
  if [[ -n "$only" ]]; then
    [[ -n "${wanted[$id]+x}" ]] && selected+=("$id")
  elif [[ "$list" == pending ]]; then
    is_pending "$id" && selected+=("$id")
  elif is_pending "$id"; then
    pending+=("$id")
  elif [[ "$list" == full || "${F_TAGS[$id]}" == *" ci "* ]]; then
    selected+=("$id")
  fi
done

# count_in TEXT NEEDLE: how many times NEEDLE occurs in TEXT.
count_in() {
  local text=$1 needle=$2 rest
  rest=${text//"$needle"/}
  echo $(((${#text} - ${#rest}) / ${#needle}))
}
read_file() { # PATH VAR: the exact bytes (trailing newlines included)
  local -n out=$2
  out=""
  # shellcheck disable=SC2034 # out is a nameref to the caller's variable
  IFS= read -r -d '' out <"$1" || true
}

# Every entry, pending ones included, must still name its expression exactly
# once: otherwise the list went stale and says nothing.
stale=0
declare -A STALE=()
check_entry() { # ID DIR
  local id=$1 f="$2/${F_FILE[$1]}" text n
  if [[ ! -f "$f" ]]; then
    STALE[$id]="${F_FILE[$id]} does not exist"
    return 1
  fi
  read_file "$f" text
  n=$(count_in "$text" "${F_FIND[$id]}")
  if ((n != 1)); then
    STALE[$id]="the guarded expression occurs $n times in ${F_FILE[$id]} (must be exactly once): ${F_FIND[$id]%%$'\n'*}"
    return 1
  fi
  if [[ "${F_FIND[$id]}" == "${F_REPLACE[$id]}" ]]; then
    STALE[$id]="the mutation is the expression itself"
    return 1
  fi
}
for id in "${ids[@]}"; do
  if ! check_entry "$id" "$root"; then
    echo "STALE    $id: ${STALE[$id]}"
    stale=$((stale + 1))
  fi
done
for id in "${pending[@]}"; do
  echo "pending  $id (${F_FILE[$id]}; not run: its tests do not exist yet; --list pending runs it)"
done
if ((check_only)); then
  echo "mutants: list checked: ${#ids[@]} entries, $stale stale"
  ((stale == 0))
  exit
fi
if ((${#selected[@]} == 0)); then
  echo "mutants.sh: no entry selected (--list $list${only:+, --only $only})" >&2
  echo "mutants: 0 killed, 0 survived"
  exit 2
fi

# ------------------------------------------------------------------ the scratch tree

key=$(printf '%s' "$root" | sha256sum | cut -c1-12)
base=${PILLAR_MUTANTS_DIR:-/var/tmp/pillar-mutants}/$key
scratch=$base/tree
build=$scratch/build
mkdir -p "$scratch"
exec {lockfd}>"$base/lock"
flock -n "$lockfd" || { echo "mutants.sh: waiting for another run on $base" >&2; flock "$lockfd"; }
logdir=$base/logs
rm -rf "$logdir"
mkdir -p "$logdir"

# Sync: copy only what differs (so unchanged files keep their times and the
# build stays valid), delete what is gone. Copies get the current time, so a
# file is never older than the object last built from another content.
sync_tree() {
  local -a files
  mapfile -d '' files < <(git ls-files -z --cached --others --exclude-standard)
  local f copied=0
  declare -A keep=()
  for f in "${files[@]}"; do
    [[ -f "$f" ]] || continue
    keep[$f]=1
    if ! cmp -s "$f" "$scratch/$f"; then
      mkdir -p "$scratch/$(dirname "$f")"
      rm -f "$scratch/$f"
      cp "$f" "$scratch/$f"
      [[ -x "$f" ]] && chmod +x "$scratch/$f"
      copied=$((copied + 1))
    fi
  done
  while IFS= read -r -d '' f; do
    f=${f#"$scratch"/}
    [[ -n "${keep[$f]+x}" ]] || rm -f "$scratch/$f"
  done < <(find "$scratch" -path "$build" -prune -o -type f -print0)
  echo "mutants: scratch tree $scratch ($copied files refreshed)"
}
sync_tree

export CCACHE_BASEDIR="$scratch" CCACHE_NOHASHDIR=1
if ! { cmake -S "$scratch" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${PILLAR_BUILD_TYPE:-RelWithDebInfo}" >"$logdir/configure.log" 2>&1 &&
  cmake --build "$build" -j"$jobs" >"$logdir/build.log" 2>&1; }; then
  tail -30 "$logdir/configure.log" "$logdir/build.log" 2>/dev/null
  echo "mutants.sh: the unmutated scratch tree does not build (logs in $logdir)"
  echo "mutants: 0 killed, 0 survived"
  exit 1
fi
echo "mutants: scratch build ready in $(($(date +%s) - t_start)) s"

# The test executables (CMake targets) that run the tests matching REGEX.
test_targets() { # REGEX
  (cd "$build" && ctest -N -V -R "$1") |
    sed -n 's/^[0-9]*: Test command: \([^ ]*\).*/\1/p' | xargs -r -n1 basename | sort -u
}
test_count() { # REGEX
  (cd "$build" && ctest -N -R "$1") | sed -n 's/^Total Tests: \([0-9]*\)$/\1/p'
}
failed_tests() { # LOG: the names ctest reports as failed
  sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (\(Failed\|Timeout\|SEGFAULT\|Subprocess aborted\|Child aborted\|Exception\|OTHER_FAULT\|Not Run\).*/\1/p' "$1" |
    paste -sd, - | sed 's/,/, /g'
}

# Each entry's regex must match tests; then all of them must pass unmutated:
# a test that fails anyway would "kill" every mutant.
regexes=()
for id in "${selected[@]}"; do
  [[ -z "${STALE[$id]+x}" ]] || continue
  n=$(test_count "${F_TESTS[$id]}")
  if [[ -z "$n" || "$n" -eq 0 ]]; then
    STALE[$id]="tests: \"${F_TESTS[$id]}\" matches no test"
    echo "STALE    $id: ${STALE[$id]}"
    stale=$((stale + 1))
    continue
  fi
  regexes+=("${F_TESTS[$id]}")
done
if ((${#regexes[@]})); then
  union=$(printf '%s|' "${regexes[@]}")
  union=${union%|}
  t0=$(date +%s)
  if ! (cd "$build" && ctest -R "$union" -j"$jobs" --timeout 300 >"$logdir/baseline.log" 2>&1); then
    echo "mutants.sh: the named tests fail on the unmutated tree: $(failed_tests "$logdir/baseline.log") (log $logdir/baseline.log)"
    echo "mutants: 0 killed, 0 survived"
    exit 1
  fi
  echo "mutants: baseline: $(test_count "$union") named tests pass unmutated ($(($(date +%s) - t0)) s)"
fi

# ------------------------------------------------------------------ the mutants

killed=0 survived=0 invalid=0
current="" current_text=""
restore() {
  [[ -n "$current" ]] || return 0
  printf '%s' "$current_text" >"$scratch/$current"
  touch "$scratch/$current"
  current=""
}
trap restore EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for id in "${selected[@]}"; do
  [[ -z "${STALE[$id]+x}" ]] || continue
  t0=$(date +%s)
  rel=${F_FILE[$id]}
  # The scratch copy may differ from the tree only by a mutant left by a
  # killed run; sync_tree put it back.
  check_entry "$id" "$scratch" || { echo "STALE    $id: ${STALE[$id]} (scratch)"; stale=$((stale + 1)); continue; }
  read_file "$scratch/$rel" text
  current=$rel current_text=$text
  printf '%s' "${text/"${F_FIND[$id]}"/"${F_REPLACE[$id]}"}" >"$scratch/$rel"
  touch "$scratch/$rel"
  mapfile -t targets < <(test_targets "${F_TESTS[$id]}")
  log=$logdir/$id.log
  if ! cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$log" 2>&1; then
    restore
    echo "INVALID  $id: the mutant does not compile (${targets[*]}; log $log) $(($(date +%s) - t0)) s"
    invalid=$((invalid + 1))
    continue
  fi
  if (cd "$build" && ctest -R "${F_TESTS[$id]}" -j"$jobs" --timeout 300 >>"$log" 2>&1); then
    restore
    echo "SURVIVED $id: ${F_FILE[$id]}: $(test_count "${F_TESTS[$id]}") tests (${F_TESTS[$id]}) all pass with the guard broken $(($(date +%s) - t0)) s"
    survived=$((survived + 1))
  else
    restore
    echo "KILLED   $id: by $(failed_tests "$log") $(($(date +%s) - t0)) s"
    killed=$((killed + 1))
  fi
done
restore

((invalid == 0 && stale == 0)) || echo "mutants: $invalid invalid, $stale stale (failures of the list: fix $listfile)"
((${#pending[@]} == 0)) || echo "mutants: ${#pending[@]} pending (known survivors, not run): ${pending[*]}"
echo "mutants: list $([[ -n "$only" ]] && echo "--only $only" || echo "$list"), $(($(date +%s) - t_start)) s, logs in $logdir"
echo "mutants: $killed killed, $survived survived"
((survived == 0 && invalid == 0 && stale == 0))
