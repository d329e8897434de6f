#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, with AddressSanitizer and UndefinedBehaviorSanitizer)
# and runs each on a seed corpus made of the project's own files.
#
#   bash scripts/fuzz.sh 30              # each target for 30 seconds (what CI runs)
#   bash scripts/fuzz.sh --runs 1000000  # each target for a million executions
#
# A crash, a sanitizer report, a leak or a hang (an input taking over 10 s) fails the run and
# leaves the input in build-fuzz/artifacts/<target>/: add it to tests/fuzz/regressions/<target>/
# (so every build replays it) before fixing the bug.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TRAINSIM_FUZZ_BUILD_DIR:-$root/build-fuzz}"
limit=(-max_total_time=30)
case "${1:-}" in
  --runs) limit=(-runs="${2:?--runs needs a count}") ;;
  "") ;;
  *) limit=(-max_total_time="$1") ;;
esac

bash "$root/scripts/install-packages.sh" clang libclang-rt-14-dev
if [ ! -f "$build/CMakeCache.txt" ]; then
  CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINSIM_FUZZ=ON \
    -DTRAINSIM_SANITIZE=address,undefined > /dev/null
fi
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)"

seeds() {
  case "$1" in
    scenario) echo "$root/scenarios" ;;
    model) echo "$root/models" ;;
    *) ;;
  esac
}

status=0
for target in scenario model trace units gpu results cluster; do
  corpus="$build/corpus/$target"
  artifacts="$build/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  log="$build/fuzz-$target.log"
  inputs=()
  for dir in $(seeds "$target") "$root/tests/fuzz/seeds/$target" "$root/tests/fuzz/regressions/$target"; do
    [ -d "$dir" ] && inputs+=("$dir")
  done
  if "$build/fuzz_$target" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$artifacts/" "$corpus" "${inputs[@]}" > "$log" 2>&1; then
    result="ok"
  else
    result="FAILED (see $log and $artifacts)"
    status=1
  fi
  runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
  seconds=$(awk '/stat::average_exec_per_sec/ {print $2}' "$log" | tail -1)
  printf 'fuzz %-9s %s: %s executions (%s per second), corpus %s inputs\n' \
    "$target" "$result" "${runs:-?}" "${seconds:-?}" "$(find "$corpus" -type f | wc -l)"
done
exit $status
