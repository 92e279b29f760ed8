#!/usr/bin/env bash
# The fidelity ladder against flat full-fidelity evaluation (issue 5's benchmark): every bundled
# example is optimized twice with the same seed and the built-in generator, once with
# --fidelity ladder (quick rung for all, rung 2 for the successive-halving survivors) and once
# with --fidelity full (every correct candidate at full fidelity). Each run starts from a fresh
# memory and a fresh artifact cache, so neither inherits the other's evidence or builds.
# Writes OUT/ladder_BACKEND.json and OUT/ladder_BACKEND.md (bench/ladder/summarize.py).
#
# usage: bench/ladder/run.sh [--backend cpu|cuda] [--out DIR] [--kforge PATH]
#                            [--machine "words"] [--tasks "rmsnorm softmax"] [--commit SHA]
#                            [--no-summary] [--task-dir DIR] [-- optimize flags...]
# --task-dir takes the tasks from DIR/NAME/task.toml instead of the bundled examples (e.g.
# bench/tasks, whose *_kernelbench tasks have KernelBench's sizes).
# --commit names the commit measured when the tree is a copy without a usable git (the GPU
# machine's copy reports a stale HEAD); --no-summary keeps the result.json files under
# OUT/runs-BACKEND for a later summarize.py over several batches (one device call is limited to
# 10 minutes, the eight examples twice take longer).
# e.g.   bench/ladder/run.sh --backend cuda --machine "1x NVIDIA H200" -- --device 0
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
backend=cpu
out="$root/bench/ladder"
kforge="$root/build/release/kforge"
machine="$(uname -n), $(nproc) cores"
tasks=""
task_dir="$root/examples"
commit=""
summary=1
extra=()
while (($#)); do
  case "$1" in
    --backend) backend=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --kforge) kforge=$2; shift 2 ;;
    --machine) machine=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    --no-summary) summary=0; shift ;;
    --task-dir) task_dir=$(cd "$2" && pwd); shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench/ladder/run.sh: unknown argument '$1' (see the header for usage)" >&2; exit 2 ;;
  esac
done
[[ -x "$kforge" ]] || { echo "bench/ladder/run.sh: no kforge at $kforge (build first)" >&2; exit 1; }
if [[ -z "$tasks" ]]; then
  tasks=$(cd "$task_dir" && ls -d */ | tr -d / | tr '\n' ' ')
fi

work="$out/runs-$backend"
rm -rf "$work"
mkdir -p "$work"
results=()
for task in $tasks; do
  for fidelity in ladder full; do
    name="$task-$fidelity"
    echo "== $name" >&2
    "$kforge" optimize "$task_dir/$task/task.toml" --backend "$backend" \
      --fidelity "$fidelity" --seed 1 --run-dir "$work/$name" \
      --memory "$work/$name.memory.sqlite" --cache-dir "$work/$name.cache" --json \
      "${extra[@]}" > "$work/$name.result.json" 2> "$work/$name.log" ||
      { echo "bench/ladder/run.sh: $name failed; see $work/$name.log" >&2; exit 1; }
    results+=("$work/$name.result.json")
  done
done
rm -rf "$work"/*.cache
if ((summary == 0)); then
  echo "kept ${#results[@]} result files under $work (no summary)" >&2
  exit 0
fi
if [[ -z "$commit" ]]; then
  commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
fi
python3 "$root/bench/ladder/summarize.py" --backend "$backend" --machine "$machine" \
  --commit "$commit" --flags "${extra[*]:-}" --out "$out/ladder_$backend" "${results[@]}"
echo "wrote $out/ladder_$backend.json and $out/ladder_$backend.md" >&2
