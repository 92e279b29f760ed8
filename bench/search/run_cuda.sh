#!/usr/bin/env bash
# Issue 21 on the GPU machine: measure the cuda spaces of KernelBench-shaped tasks
# (bench/tasks/<task>_kernelbench) within one device call, resuming where the last call stopped.
#
#   KFORGE_COMMIT=$(git rev-parse --short HEAD) bench/search/run_cuda.sh [TOTAL_S] [TASK...]
#       (default 540 s; tasks default: rmsnorm_channels relu silu softmax log_softmax)
#
# A space is measured into spaces/partial/cuda/<family>.json (`--resume`: a call continues the
# points the last one left) and moved to spaces/cuda/ once it holds every point, so that
# kforge_bench_simulate --spaces spaces/cuda only ever reads whole spaces. What comes back:
# $OUT/spaces/<family>.json (whole: copy to bench/search/spaces/cuda/), $OUT/spaces/partial/
# <family>.json (copy to bench/search/spaces/partial/cuda/ before the next call) and one log (a
# device call returns at most 8 files). The binaries are carried in build/release (or KFORGE_BUILD), built on the
# development machine as for scripts/gpu-check.
set -uo pipefail
cd "$(dirname "$0")/../.."
here="$PWD"
out="${OUT:-$here/gpu-out}"
mkdir -p "$out/spaces/partial" bench/search/spaces/cuda bench/search/spaces/partial/cuda
total_s="${1:-540}"
shift || true
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(rmsnorm_channels relu silu softmax log_softmax)
. scripts/device-env.sh
export KFORGE_WORKER="$here/build/release/kforge-worker"
log="$out/spaces/run_cuda.log"
deadline=$(( $(date +%s) + total_s ))
for task in "${tasks[@]}"; do
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt 60 ]; then echo "== $task: not started ($left s left)" | tee -a "$log"; continue; fi
  partial="bench/search/spaces/partial/cuda/$task.json"
  echo "== $task ($left s left)" | tee -a "$log"
  code=0
  # --max-s stops before a new point; the builds before the first point are not bounded by it.
  "build/release/bench/kforge_bench_measure_space" \
    --task "bench/tasks/${task}_kernelbench/task.toml" --backend cuda --out "$partial" --resume \
    --max-s $(( left - 45 )) --commit "${KFORGE_COMMIT:-unknown}" >> "$log" 2>&1 || code=$?
  tail -1 "$log"
  if [ "$code" = 0 ]; then
    mv "$partial" "bench/search/spaces/cuda/$task.json"
    cp "bench/search/spaces/cuda/$task.json" "$out/spaces/"
    echo "   complete: spaces/cuda/$task.json" | tee -a "$log"
  else
    if [ -e "$partial" ]; then
      cp "$partial" "$out/spaces/partial/"
      echo "   exit $code: $partial kept for --resume" | tee -a "$log"
    else
      echo "   exit $code: no space written (the log above says why)" | tee -a "$log"
    fi
  fi
done
