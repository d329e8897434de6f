#!/usr/bin/env bash
# Benchmark: wall-clock time and peak memory of `trainsim run`. Not a test: these machines are
# shared, so numbers are reported (README, Performance), never asserted.
#
#   bash bench/run.sh [repetitions]   small scenarios, median of `repetitions` runs (default 5)
#   bash bench/run.sh --scale         GPT-3 175B on 64, 256 and 1,024 GPUs, both fidelities; Llama 3 405B
#                                     on 16,384 GPUs; a data-parallel step of 1,024 ranks, both fidelities
#   bash bench/run.sh --planning      a 256-configuration sweep and the plan for Llama 3 70B
#   bash bench/run.sh --moe           mixtures of experts: the shipped scenarios, Mixtral 8x22B on 64 and 256 GPUs,
#                                     DeepSeek-V3 on 2,048 GPUs (1F1B, and DualPipe with fp8)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/with-build.sh"

# One run: prints wall seconds, peak RSS, replayed ops and ops per second of replay.
measure() { measure_command run "$@"; }

# The same for any command that replays (`run`, `replay`): its name, then its arguments.
measure_command() {
  local log="$out/log" command="$1"
  shift
  /usr/bin/time -f "%e %M" -o "$out/time" "$build/trainsim" --log-level info "$command" "$@" --out "$out/run" > "$log" 2>&1
  local wall rss ops replay
  read -r wall rss < "$out/time"
  ops=$(sed -n 's/.*replaying [0-9]* ranks, \([0-9]*\) ops.*/\1/p' "$log")
  replay=$(sed -n 's/.*simulated [0-9.]* s in \([0-9.]*\) s of wall time.*/\1/p' "$log")
  awk -v w="$wall" -v r="$rss" -v o="$ops" -v t="$replay" \
    'BEGIN {printf "wall %.2f s, peak RSS %.0f MiB, %d ops replayed in %.2f s (%.0f ops/s)", w, r / 1024, o, t, o / t}'
}

if [ "${1:-}" = "--planning" ]; then
  # A sweep of 256 configurations of Llama 3 8B on up to 64 GPUs (two GPU types), then the plan
  # for Llama 3 70B on 64 to 256 H100s.
  start=$(date +%s.%N)
  "$build/trainsim" sweep scenarios/llama3-8b-zero1.ini --set platform.gpu=h100-sxm --set platform.nodes=8 \
    --set parallel.dp=8 --set training.global_batch=64 --set comm.fidelity=fast \
    --vary platform.gpu=a100-80gb,h100-sxm --vary parallel.tp=1,2,4,8 --vary parallel.pp=1,2 \
    --vary memory.zero=0,1,2,3 --vary memory.recompute=none,selective,full,every:2 -o "$out/sweep.csv" 2> /dev/null | tail -1
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN {printf "sweep of 256 configurations: %.1f s (%.2f configurations/s)\n", b - a, 256 / (b - a)}'
  start=$(date +%s.%N)
  "$build/trainsim" plan --model llama3-70b --gpu h100-sxm --gpus 64..256 --global-batch 512 --seq-len 4096 \
    -o "$out/plan" 2> "$out/plan.err" | head -8
  grep "memory check" "$out/plan.err"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN {printf "plan of llama3-70b on 64-256 H100s: %.1f s\n", b - a}'
  exit 0
fi

if [ "${1:-}" = "--moe" ]; then
  echo "Mixtral 8x7B, 16 H100, tp 2 sp, ep 8 (scenario):          $(measure scenarios/mixtral-8x7b-ep8.ini)"
  echo "  the same under zipf:1.2 routing (a program per ep place): $(measure scenarios/mixtral-8x7b-ep8.ini \
    --set moe.routing=zipf:1.2 --no-routing-baseline)"
  echo "Qwen3-30B-A3B, 8 H100, ep 8 (scenario):                   $(measure scenarios/qwen3-30b-a3b-ep8.ini)"
  # Mixtral 8x22B with tp 4 sp, pp 8, ep 8 (the ep groups span 4 nodes), full recompute, fast.
  mixtral22="scenarios/mixtral-8x7b-ep8.ini --set model.name=mixtral-8x22b --set parallel.tp=4 --set parallel.pp=8
    --set comm.fidelity=fast"
  # shellcheck disable=SC2086
  echo "Mixtral 8x22B, 64 A100 (dp 2, ep 2, global batch 32):     $(measure $mixtral22 --set platform.file=dgx-a100-8n.xml \
    --set parallel.dp=2 --set parallel.ep=2 --set training.global_batch=32)"
  # shellcheck disable=SC2086
  echo "Mixtral 8x22B, 256 A100 (dp 8, ep 8, global batch 128):   $(measure $mixtral22 --set platform.file=dgx-a100-32n.xml \
    --set parallel.dp=8 --set parallel.ep=8 --set training.global_batch=128)"
  echo "DeepSeek-V3, 2048 H800, pp 16, ep 64 (scenario):          $(measure scenarios/deepseek-v3-2048.ini)"
  echo "  the same under DualPipe, fp8 GEMMs and dispatch:          $(measure scenarios/deepseek-v3-2048.ini \
    --set parallel.schedule=dualpipe --set memory.precision=fp8 --set moe.dispatch_precision=fp8)"
  exit 0
fi

if [ "${1:-}" = "--scale" ]; then
  gpt3=scenarios/gpt3-175b-1024.ini
  for fidelity in ${TRAINSIM_BENCH_FIDELITIES:-fast flows}; do
    echo "GPT-3 175B, tp=8 sp, interleaved (vpp=2), ZeRO-1, comm.fidelity=$fidelity:"
    echo "   64 GPUs (pp=8, dp=1, global batch 96):   $(measure $gpt3 --set platform.file=dgx-a100-8n.xml \
      --set parallel.pp=8 --set parallel.dp=1 --set training.global_batch=96 --set comm.fidelity=$fidelity)"
    echo "  256 GPUs (pp=16, dp=2, global batch 384): $(measure $gpt3 --set platform.file=dgx-a100-32n.xml \
      --set parallel.dp=2 --set training.global_batch=384 --set comm.fidelity=$fidelity)"
    echo " 1024 GPUs (pp=16, dp=8, global batch 1536): $(measure $gpt3 --set comm.fidelity=$fidelity)"
  done
  echo "Llama 3 405B, 16,384 H100 on Llama 3's three-tier Clos (scenario, fast): $(measure scenarios/llama3-405b-16k.ini)"
  # A pure data-parallel step: 1,024 ranks, 24 layers, each a backward kernel then a 100 MB
  # all-reduce of its gradients, on 128 nodes of 8 H100s (NVSwitch) with one 400 Gb/s NIC each.
  "$build/trainsim" platform --gpu h100-sxm --nodes 128 --nics-per-node 1 --nic-speed 400Gbps -o "$out/dp.xml" > /dev/null
  mkdir -p "$out/dp"
  printf 'format 3\nranks 1024\ngroup dp dp 0-1023\nprogram step.trace 0-1023\n' > "$out/dp/workload.txt"
  awk 'BEGIN { for (l = 0; l < 24; ++l) { printf "%d compute flops=1e12 bytes=0\n", 2 * l;
                                          printf "%d collective op=allreduce group=dp bytes=1e8 deps=%d\n", 2 * l + 1, 2 * l } }' \
    > "$out/dp/step.trace"
  for fidelity in fast flows; do
    echo "Data-parallel step, 1,024 ranks, 24 all-reduces of 100 MB, $fidelity: $(measure_command replay "$out/dp" \
      --platform "$out/dp.xml" --fidelity $fidelity)"
  done
  exit 0
fi

repetitions="${1:-5}"
for scenario in scenarios/default.ini scenarios/llama3-70b-2n.ini scenarios/llama3-70b-pp4-interleaved.ini \
  scenarios/llama2-70b-offload-nvme.ini scenarios/workstation-llama3-8b-finetune.ini; do
  times=()
  for ((i = 0; i < repetitions; i++)); do
    start=$(date +%s.%N)
    "$build/trainsim" --log-level error run "$scenario" --out "$out/run" > /dev/null
    end=$(date +%s.%N)
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')")
  done
  sorted=($(printf '%s\n' "${times[@]}" | sort -g))
  printf '%-42s median %.3f s (min %.3f, max %.3f) over %d runs; %s\n' "$scenario" \
    "${sorted[$((repetitions / 2))]}" "${sorted[0]}" "${sorted[$((repetitions - 1))]}" "$repetitions" \
    "$(measure "$scenario" | sed 's/^wall [0-9.]* s, //')"
done
