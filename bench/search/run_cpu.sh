#!/usr/bin/env bash
# Issue 21 on this machine's cpu backend: measure the spaces of the transfer sets' families once
# (each point built, gated, timed at rungs 1 and 2; --resume continues a space a stop cut short),
# then run the policy, transfer and ladder simulations over them.
#
#   bench/search/run_cpu.sh [BUILD_DIR] [SEEDS]     (default build/release, 10 seeds)
#
# Writes bench/search/spaces/cpu/<family>.json, bench/search/simulate_cpu.json and
# bench/search/simulate_cpu.md. On the H200 the same tools take --backend cuda and the
# KernelBench-shaped tasks under bench/tasks (bench/search/README.md).
set -euo pipefail
build="${1:-build/release}"
seeds="${2:-10}"
export KFORGE_WORKER="$PWD/$build/kforge-worker"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
mkdir -p bench/search/spaces/cpu
for family in softmax rmsnorm log_softmax layernorm; do
  code=0
  "$build/bench/kforge_bench_measure_space" --task "examples/$family/task.toml" --backend cpu \
    --out "bench/search/spaces/cpu/$family.json" --resume --commit "$commit" || code=$?
  [ "$code" = 0 ] || { echo "measuring $family stopped (exit $code): run again to continue"; exit "$code"; }
done
"$build/bench/kforge_bench_simulate" --spaces bench/search/spaces/cpu --seeds "$seeds" \
  --transfer-a softmax,rmsnorm --transfer-b log_softmax,layernorm \
  --out bench/search/simulate_cpu.json --table bench/search/simulate_cpu.md --commit "$commit"
cat bench/search/simulate_cpu.md
