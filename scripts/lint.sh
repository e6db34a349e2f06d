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
mapfile -t tidy < <(git ls-files --cached --others --exclude-standard 'src/*.cc')
log=$(mktemp)
if printf '%s\n' "${tidy[@]}" | xargs -P2 -n4 clang-tidy -p "$build" --quiet --warnings-as-errors='*' >"$log" 2>&1; then
  echo "lint: clang-tidy clean (${#tidy[@]} files)"
  rm -f "$log"
else
  grep -v -E '^[0-9]+ warnings? generated|^Suppressed|^Use -header-filter' "$log" | head -100
  rm -f "$log"
  echo "lint: clang-tidy found problems"
  exit 1
fi
