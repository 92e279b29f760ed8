#!/usr/bin/env bash
# Issue 6's CPU target: the built-in CPU kernels against a measured stream bandwidth of this
# machine. Measures the ceiling with kforge_bench_copy cpu (memcpy and STREAM "scale", both over
# every hardware thread), then optimizes each task with the cpu backend and compares the best
# kernel's achieved bandwidth (minimum bytes: inputs read once, outputs written once) with the
# STREAM scale bandwidth. Writes OUT/cpu_bandwidth.json and OUT/cpu_bandwidth.md.
#
# usage: bench/cpu_bandwidth/run.sh [--out DIR] [--machine "words"] [--tasks "relu rmsnorm"]
#                                   [--commit SHA] [--wait-quiet] [-- optimize flags...]
# --wait-quiet: on a machine shared with other work, wait before each measurement (ceilings and
# tasks) for 20 s with next to nothing else runnable (at most 30 min, then go on with a note in
# the log); every task's log gets the load averages before and after it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/bench/cpu_bandwidth"
machine="$(uname -n), $(nproc) cores"
tasks="relu silu gelu rmsnorm softmax layernorm"
commit=""
wait_quiet=0
extra=(--steps 1)
while (($#)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --machine) machine=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    --wait-quiet) wait_quiet=1; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench/cpu_bandwidth/run.sh: unknown argument '$1' (see the header)" >&2; exit 2 ;;
  esac
done
kforge="$root/build/release/kforge"
copy="$root/build/release/bench/kforge_bench_copy"
for tool in "$kforge" "$copy"; do
  [[ -x "$tool" ]] || { echo "bench/cpu_bandwidth/run.sh: no $tool (build first)" >&2; exit 1; }
done
[[ -n "$commit" ]] || commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
# Waits for a 20 s window (40 samples of /proc/loadavg's running count, 0.5 s apart) whose mean
# count is 2.3 or less: on this VM idle it averages ~1.8 (the reader itself and the host's
# agents), and a build or benchmark keeps at least one more process running. Prints how long it
# waited.
wait_for_quiet() {
  ((wait_quiet)) || return 0
  local start=$SECONDS total running
  while true; do
    total=0
    for _ in $(seq 40); do
      running=$(cut -d' ' -f4 /proc/loadavg)
      total=$((total + ${running%%/*}))
      sleep 0.5
    done
    ((total <= 92)) && break
    if ((SECONDS - start > 1800)); then echo "waited 30 min for a quiet machine; going on" >&2; break; fi
  done
  echo "quiet after $((SECONDS - start)) s; load averages $(cut -d' ' -f1-3 /proc/loadavg)"
}
work="$out/runs"
rm -rf "$work"
mkdir -p "$work"
echo "== ceiling (before)" >&2
wait_for_quiet >&2
"$copy" cpu > "$work/ceiling_before.json"
cat "$work/ceiling_before.json" >&2
results=()
for task in $tasks; do
  echo "== $task" >&2
  wait_for_quiet > "$work/$task.log"
  "$kforge" optimize "$root/examples/$task/task.toml" --backend cpu --seed 1 \
    --run-dir "$work/$task" --memory "$work/memory.sqlite" --cache-dir "$work/cache" --json \
    "${extra[@]}" > "$work/$task.result.json" 2>> "$work/$task.log" ||
    { echo "bench/cpu_bandwidth/run.sh: $task failed; see $work/$task.log" >&2; exit 1; }
  echo "load averages after $task: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$work/$task.log"
  results+=("$work/$task.result.json")
done
echo "== ceiling (after)" >&2
wait_for_quiet >&2
"$copy" cpu > "$work/ceiling_after.json"
cat "$work/ceiling_after.json" >&2
python3 "$root/bench/cpu_bandwidth/summarize.py" --machine "$machine" --commit "$commit" \
  --flags "${extra[*]}" --ceiling "$work/ceiling_before.json" "$work/ceiling_after.json" \
  --out "$out/cpu_bandwidth" -- "${results[@]}"
rm -rf "$work/cache" "$work"/*/candidates
echo "wrote $out/cpu_bandwidth.json and $out/cpu_bandwidth.md" >&2
