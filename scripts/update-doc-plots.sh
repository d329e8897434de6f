#!/usr/bin/env bash
# Regenerates the plots the README shows, with trainsim itself: the default scenario's three
# plots and the Gantt charts of Llama 3 70B's pipeline under seven schedules.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/with-build.sh"
"$build/trainsim" run scenarios/default.ini --out "$out/default" > /dev/null
for plot in memory pipeline breakdown; do
  cp "$out/default/$plot.svg" "docs/images/default-$plot.svg"
done
"$build/trainsim" run scenarios/llama3-70b-pp4-interleaved.ini --set training.global_batch=16 --out "$out/pipeline" > /dev/null
cp "$out/pipeline/pipeline.svg" docs/images/llama3-70b-pp4-interleaved-pipeline.svg
# The same model and batch under 1F1B, the zero-bubble schedules, DualPipeV and DualPipe.
for schedule in 1f1b zb-h1 zb-h2 zb-v dualpipev dualpipe; do
  "$build/trainsim" run scenarios/llama3-70b-pp4-1f1b.ini --set parallel.schedule=$schedule \
    --set training.global_batch=16 --out "$out/$schedule" > /dev/null
  cp "$out/$schedule/pipeline.svg" "docs/images/llama3-70b-pp4-$schedule-pipeline.svg"
done
echo "docs/images updated"
