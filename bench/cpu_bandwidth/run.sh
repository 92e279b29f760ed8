#!/usr/bin/env bash
# Issue 6's CPU target: the built-in CPU kernels against a measured stream bandwidth of this
# machine. Measures the ceiling with kforge_bench_copy cpu (memcpy and STREAM "scale", both over
# every hardware thread), then optimizes each task with the cpu backend and compares the best
# kernel's achieved bandwidth (minimum bytes: inputs read once, outputs written once) with the
# STREAM scale bandwidth. Writes OUT/cpu_bandwidth.json and OUT/cpu_bandwidth.md.
#
# usage: bench/cpu_bandwidth/run.sh [--out DIR] [--machine "words"] [--tasks "relu rmsnorm"]
#                                   [--commit SHA] [-- optimize flags...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/bench/cpu_bandwidth"
machine="$(uname -n), $(nproc) cores"
tasks="relu silu gelu rmsnorm softmax layernorm"
commit=""
extra=(--steps 1)
while (($#)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --machine) machine=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
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
work="$out/runs"
rm -rf "$work"
mkdir -p "$work"
echo "== ceiling (before)" >&2
"$copy" cpu > "$work/ceiling_before.json"
cat "$work/ceiling_before.json" >&2
results=()
for task in $tasks; do
  echo "== $task" >&2
  "$kforge" optimize "$root/examples/$task/task.toml" --backend cpu --seed 1 \
    --run-dir "$work/$task" --memory "$work/memory.sqlite" --cache-dir "$work/cache" --json \
    "${extra[@]}" > "$work/$task.result.json" 2> "$work/$task.log" ||
    { echo "bench/cpu_bandwidth/run.sh: $task failed; see $work/$task.log" >&2; exit 1; }
  results+=("$work/$task.result.json")
done
echo "== ceiling (after)" >&2
"$copy" cpu > "$work/ceiling_after.json"
cat "$work/ceiling_after.json" >&2
python3 "$root/bench/cpu_bandwidth/summarize.py" --machine "$machine" --commit "$commit" \
  --flags "${extra[*]}" --ceiling "$work/ceiling_before.json" "$work/ceiling_after.json" \
  --out "$out/cpu_bandwidth" -- "${results[@]}"
rm -rf "$work/cache" "$work"/*/candidates
echo "wrote $out/cpu_bandwidth.json and $out/cpu_bandwidth.md" >&2
