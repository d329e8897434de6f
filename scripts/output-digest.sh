#!/usr/bin/env bash
# Digest of everything trainsim writes for the shipped scenarios: `run` (printed summary and every
# output file), `memory`, `trace` (trace files) and `replay` of them, a small `plan` and a `sweep`.
# A change meant to keep behaviour (a restructuring) must leave it identical:
#
#   bash scripts/output-digest.sh > before.txt    # on the old commit
#   bash scripts/output-digest.sh > after.txt     # on the new one
#   diff before.txt after.txt
#
# One line per file: its SHA-256 and its path under the output tree. Takes about five minutes (the
# 16,384-GPU run three of them).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/with-build.sh"

# What a command prints names the scratch directory: that part is left out.
trainsim() { "$build/trainsim" "$@" | sed "s|$out|OUT|g"; }
for ini in scenarios/*.ini; do
  name=$(basename "$ini" .ini)
  mkdir -p "$out/$name"
  trainsim run "$ini" -o "$out/$name/run" > "$out/$name/run.stdout"
  trainsim memory "$ini" > "$out/$name/memory.stdout"
  # The traces of 1,024 and more GPUs are gigabytes of text: the run covers those scenarios.
  if [ "$name" != gpt3-175b-1024 ] && [ "$name" != llama3-405b-16k ]; then
    trainsim trace "$ini" -o "$out/$name/trace" > "$out/$name/trace.stdout"
    platform=$(sed -n 's/^file *= *//p' "$ini" | head -1)
    [ -n "$platform" ] && trainsim replay "$out/$name/trace" --platform "platforms/$platform" -o "$out/$name/replay" \
      > "$out/$name/replay.stdout"
  fi
done
trainsim memory scenarios/default.ini --compare memory.zero=0,1,2,3 > "$out/memory-compare.stdout"
trainsim plan --model tiny-gpt --gpu a100-80gb --gpus 8..16 --global-batch 32 --seq-len 512 --simulate 4 \
  -o "$out/plan" > "$out/plan.stdout" 2> /dev/null
trainsim sweep scenarios/default.ini --vary memory.zero=0,1,2,3 --vary comm.bucket_size=25MiB,100MiB \
  -o "$out/sweep.csv" > "$out/sweep.stdout" 2> /dev/null
# Files that name the checkout (the plan's scenario names its model file) are compared without it.
grep -rlF "$root" "$out" | xargs -r sed -i "s|$root|ROOT|g"
(cd "$out" && find . -type f | LC_ALL=C sort | xargs sha256sum)
