#!/usr/bin/env bash
# Benchmark: wall-clock time of `trainsim run` on the benchmark scenarios.
# Not a test: these machines are shared, so numbers are reported, never asserted.
#
#   bash bench/run.sh [repetitions]     (default 5; prints the median and the range)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TRAINSIM_BUILD_DIR:-$root/build}"
repetitions="${1:-5}"
bash "$root/scripts/bootstrap.sh" build > /dev/null
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

for scenario in scenarios/default.ini scenarios/llama3-70b-2n.ini; do
  times=()
  for ((i = 0; i < repetitions; i++)); do
    start=$(date +%s.%N)
    (cd "$root" && "$build/trainsim" run "$scenario" --out "$out/run" > /dev/null)
    end=$(date +%s.%N)
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')")
  done
  sorted=($(printf '%s\n' "${times[@]}" | sort -g))
  median="${sorted[$((repetitions / 2))]}"
  ops=$(cd "$root" && "$build/trainsim" trace "$scenario" --out "$out/trace" > /dev/null &&
        grep -vc '^#' "$out/trace"/program-*.trace | awk -F: '{s += $NF} END {print s}')
  ranks=$(awk '/^ranks/ {print $2}' "$out/trace/workload.txt")
  printf '%-32s median %.3f s (min %.3f, max %.3f) over %d runs; %d ranks x %d ops\n' \
    "$scenario" "$median" "${sorted[0]}" "${sorted[$((repetitions - 1))]}" "$repetitions" "$ranks" "$ops"
  rm -rf "$out/trace"
done
