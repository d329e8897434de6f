#!/usr/bin/env bash
# Regenerates the plots the README shows, with trainsim itself: the default scenario's three
# plots and the interleaved pipeline's Gantt chart.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/with-build.sh"
"$build/trainsim" run scenarios/default.ini --out "$out/default" > /dev/null
for plot in memory pipeline breakdown; do
  cp "$out/default/$plot.svg" "docs/images/default-$plot.svg"
done
"$build/trainsim" run scenarios/llama3-70b-pp4-interleaved.ini --set training.global_batch=16 --out "$out/pipeline" > /dev/null
cp "$out/pipeline/pipeline.svg" docs/images/llama3-70b-pp4-interleaved-pipeline.svg
echo "docs/images updated"
