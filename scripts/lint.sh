#!/usr/bin/env bash
# clang-format must report nothing; clang-tidy runs on our sources with the
# checks in .clang-tidy, warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'bench/*.h' 'fuzz/*.cc')
clang-format --dry-run --Werror "${files[@]}"
echo "lint: clang-format clean (${#files[@]} files)"
build=${PILLAR_BUILD_DIR:-build}
if [[ ! -f "$build/compile_commands.json" ]]; then ./scripts/build.sh; fi
# The generated protobuf headers, as the sources now need them: a build dir
# from before a .proto change would have clang-tidy read stale ones.
cmake --build "$build" --target pillar_proto_agent pillar_proto_csi pillar_proto_registry >/dev/null
mapfile -t all < <(git ls-files --cached --others --exclude-standard 'src/*.cc')
# A file whose inputs (tidy-keys.py: itself after the preprocessor with
# comments and #defines, its flags, the checks, clang-tidy's version) passed
# before is not linted again: cold, clang-tidy takes 4-10 min here; the
# verdicts are kept outside the tree.
cache=${PILLAR_LINT_CACHE:-/var/cache/pillar-lint}
mkdir -p "$cache"
tidy=() keys=() seen=0
while read -r key file; do
  seen=$((seen + 1))
  if [[ "$key" != - && -e "$cache/$key" ]]; then continue; fi
  tidy+=("$file")
  [[ "$key" == - ]] || keys+=("$key")
done < <(python3 scripts/tidy-keys.py . "$build" "${all[@]}")
if ((seen != ${#all[@]})); then # no verdict for some file: lint them all
  echo "lint: scripts/tidy-keys.py answered for $seen of ${#all[@]} files; linting all" >&2
  tidy=("${all[@]}") keys=()
fi
log=$(mktemp)
if ((${#tidy[@]} == 0)) ||
  printf '%s\n' "${tidy[@]}" | xargs -P2 -n4 clang-tidy -p "$build" --quiet --warnings-as-errors='*' >"$log" 2>&1; then
  for key in "${keys[@]}"; do : >"$cache/$key"; done
  echo "lint: clang-tidy clean (${#all[@]} files, ${#tidy[@]} linted, $((${#all[@]} - ${#tidy[@]})) unchanged since a clean run)"
  rm -f "$log"
else
  grep -v -E '^[0-9]+ warnings? generated|^Suppressed|^Use -header-filter' "$log" | head -100
  rm -f "$log"
  echo "lint: clang-tidy found problems"
  exit 1
fi
