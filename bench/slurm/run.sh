#!/usr/bin/env bash
# Issue 23's throughput target on the local Slurm (tests/slurm/start-local-slurm: one node,
# 2 CPUs): a suite of N copies of tests/data/softmax_small (cpu backend, one expert hint a task,
# --workers 1) with --max-parallel 1, then 2; the wall times, their ratio, and the executor's
# overhead per task (a row's wall time, from sbatch to the end seen by squeue plus the memory
# merge, less the run's own wall time in result.json). Needs root, slurm-wlm and munge.
#   bench/slurm/run.sh [BUILD_DIR] [N]     (defaults: build/lead, 10)
# Writes bench/slurm/max_parallel_cpu.json and .md.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$root/build/lead}" && pwd)"
tasks="${2:-10}"
work="$(mktemp -d /tmp/kforge-bench-slurm.XXXXXX)"
slurm="/tmp/kfbs-$$"
trap '"$root/tests/slurm/stop-local-slurm" "$slurm" >/dev/null 2>&1; rm -rf "$slurm"' EXIT
export SLURM_CONF="$slurm/slurm.conf"
"$root/tests/slurm/start-local-slurm" "$slurm" >/dev/null
template="$root/tests/data/softmax_small"
for i in $(seq -w 1 "$tasks"); do
  mkdir -p "$work/tasks/t$i"
  sed -E "s#= \"([^\"]*\\.(cpp|cu))\"#= \"$template/\\1\"#" "$template/task.toml" > "$work/tasks/t$i/task.toml"
done
declare -A wall
cut -d' ' -f1-3 /proc/loadavg > "$work/load_start"
for parallel in 1 2; do
  start=$(date +%s.%N)
  KFORGE_MEMORY="$work/memory-$parallel.sqlite" KFORGE_CACHE_DIR="$work/cache-$parallel" \
    "$build/kforge" suite "$work/tasks" --suite-dir "$work/suite-$parallel" --executor slurm \
    --max-parallel "$parallel" --backend cpu --steps 0 --max-candidates 1 --final-rounds 1 \
    --workers 1 >/dev/null 2>"$work/suite-$parallel.log"
  wall[$parallel]=$(echo "$(date +%s.%N) - $start" | bc)
done
python3 - "$work" "$tasks" "${wall[1]}" "${wall[2]}" "$root" <<'PY'
import json, os, platform, subprocess, sys, datetime, statistics
work, tasks, wall1, wall2, root = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
def per_task(suite):
    """(executor overheads, the runs' own wall seconds) of each row."""
    rows = json.load(open(os.path.join(work, suite, "suite.json")))["tasks"]
    overhead, run_s = [], []
    for row in rows:
        run = json.load(open(os.path.join(row["run_dir"], "result.json")))
        overhead.append(row["wall_s"] - run["wall_s"])
        run_s.append(run["wall_s"])
    return overhead, run_s
(o1, r1), (o2, r2) = per_task("suite-1"), per_task("suite-2")
load_start = open(os.path.join(work, "load_start")).read().split()[:3]
commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
result = {
    "what": "kforge suite --executor slurm on a local single-node Slurm (2 CPUs), N copies of tests/data/softmax_small, cpu backend, --steps 0 --max-candidates 1 --final-rounds 1 --workers 1",
    "machine": platform.node() + ", " + str(os.cpu_count()) + " cores, load average at the start " + " ".join(load_start) + ", at the end " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
    "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "commit": commit, "tasks": tasks,
    "wall_s_max_parallel_1": round(wall1, 1), "wall_s_max_parallel_2": round(wall2, 1),
    "ratio_2_over_1": round(wall2 / wall1, 3), "target_ratio": 0.6,
    "overhead_s_per_task_max_parallel_1": {"median": round(statistics.median(o1), 2), "max": round(max(o1), 2)},
    "overhead_s_per_task_max_parallel_2": {"median": round(statistics.median(o2), 2), "max": round(max(o2), 2)},
    "target_overhead_s": 5.0,
    # A task's own run (result.json wall_s): how much slower two side by side make each other.
    "run_s_per_task_max_parallel_1": {"mean": round(statistics.fmean(r1), 2), "sum": round(sum(r1), 1)},
    "run_s_per_task_max_parallel_2": {"mean": round(statistics.fmean(r2), 2), "sum": round(sum(r2), 1)},
    # Wall at --max-parallel 2 if runs and overheads were perfectly packed into 2 slots.
    "packed_wall_s_max_parallel_2": round((sum(r2) + sum(o2)) / 2, 1),
}
here = os.path.join(root, "bench", "slurm")
json.dump(result, open(os.path.join(here, "max_parallel_cpu.json"), "w"), indent=2)
with open(os.path.join(here, "max_parallel_cpu.md"), "w") as md:
    md.write(f"# `kforge suite --executor slurm`: --max-parallel 1 vs 2 (local Slurm)\n\n{result['what']}.\n"
             f"Machine: {result['machine']}; {result['date']}; commit {commit}.\n\n"
             "| --max-parallel | wall s | executor overhead per task, median (max) s |\n| ---: | ---: | --- |\n"
             f"| 1 | {wall1:.1f} | {statistics.median(o1):.2f} ({max(o1):.2f}) |\n"
             f"| 2 | {wall2:.1f} | {statistics.median(o2):.2f} ({max(o2):.2f}) |\n\n"
             f"Ratio 2 over 1: {wall2 / wall1:.3f} (issue 23's target: at most 0.6). Overhead target: at most 5 s a task.\n"
             f"A task's own run: {statistics.fmean(r1):.2f} s alone, {statistics.fmean(r2):.2f} s two side by side "
             f"({statistics.fmean(r2) / statistics.fmean(r1):.2f}x); perfectly packed, --max-parallel 2 would take "
             f"{result['packed_wall_s_max_parallel_2']:.1f} s (ratio {result['packed_wall_s_max_parallel_2'] / wall1:.3f}).\n")
print(json.dumps(result, indent=2))
PY
rm -rf "$work"
