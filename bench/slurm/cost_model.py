#!/usr/bin/env python3
"""What a KernelBench suite costs on N GPUs under `kforge suite --executor slurm` (issue 23).

A paper model of one task's cost, fitted to kforge's own H200 measurements, drives a
discrete-event simulation of the suite driver (src/executor/slurm_executor.cpp) on N GPUs.
Python 3.11 standard library only; deterministic for a given seed.

Inputs (all files of this repository; paths relative to its root):
  /work/shared/baselines/kernelbench_eager_h200.json   eager ms of the 250 KernelBench problems
  bench/torch/suite_l1_h200_s4.json, ..._overhead.json  6 served level-1 problems on the H200
                                                        (--steps 1): candidates, device s, wall s
  bench/slurm/driver_costs.json                         snapshot / merge / squeue-parse seconds (schema 4,
                                                        snapshots marked: a merge exports only the
                                                        job's rows; driver_costs_whole_file.json:
                                                        before marks; driver_costs_schema3.json:
                                                        before the index), by kforge_bench_driver_costs
  bench/slurm/max_parallel_cpu.json                     the executor's overhead per task (1.36 s)
  bench/slurm/squeue_cost_local.json                    sbatch and the executor's squeue on the
                                                        local Slurm (1-1000 job ids)
  bench/slurm/driver_costs_dedupe_index.json            the merge with an index on its lookup
                                                        key (a what-if, not kforge's schema)

Every assumed number is an `Assumptions` field, printed into the output with its value; the
sensitivity section of the output reruns the simulation with each one changed.

  python3 bench/slurm/cost_model.py [--out-json F] [--out-md F] [--seed S] [--baselines F]
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import heapq
import json
import math
import os
import platform
import random
import statistics
import subprocess
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BASELINES = "/work/shared/baselines/kernelbench_eager_h200.json"


@dataclass
class TaskModel:
    """One task's cost on one H200, fitted to the served level-1 problems (--steps 1).

    device_s(task) = candidates * (device_fixed_s + device_per_eager_ms_s * eager_ms) * noise
    wall_s(task)   = outside_fixed_s + compile_per_candidate_s * candidates + device_s(task)
    noise: lognormal, sigma = device_sigma (the fit's residual spread in log space).
    """

    device_fixed_s: float          # device seconds per candidate at eager 0 ms (gate, rungs)
    device_per_eager_ms_s: float   # device seconds per candidate per eager millisecond
    device_sigma: float            # residual spread of ln(device s per candidate)
    outside_fixed_s: float         # child start, prepare (torch.compile baseline included)
    compile_per_candidate_s: float  # nvcc and search bookkeeping per candidate
    fit_points: list = field(default_factory=list)

    def device_s(self, eager_ms: float, candidates: int, rng: random.Random) -> float:
        """Device seconds of one task (a seeded draw around the fit)."""
        mean = candidates * (self.device_fixed_s + self.device_per_eager_ms_s * eager_ms)
        return mean * math.exp(rng.gauss(0.0, self.device_sigma) - 0.5 * self.device_sigma ** 2)

    def wall_s(self, device_s: float, candidates: int) -> float:
        """Seconds the task's job holds its GPU (its `kforge optimize` from start to end)."""
        return self.outside_fixed_s + self.compile_per_candidate_s * candidates + device_s


@dataclass
class Assumptions:
    """Numbers no measurement in the repository gives; each is varied in the sensitivity runs."""

    candidates: int = 21            # default budget: 3 hints + 6 steps x 3 (optimize_h200.md)
    evidence_rows_per_job: int = 18  # one row per step candidate (optimizer_candidate.cpp)
    # sbatch and squeue were timed on an idle local slurmctld; a production controller under
    # load answers slower: this multiplies both.
    slurm_command_scale: float = 1.0
    initial_memory_rows: int = 0    # evidence rows in the suite's memory before the suite
    llm_s_per_candidate: float = 0.0  # generation latency (templates: ~0; an LLM adds its own)
    device_scale: float = 1.0       # multiplies every task's device seconds
    # Wall seconds per candidate beyond the fit's 0.97 s: the fit saw 5-8 candidates only; the
    # torch README's "13-14 s of nvcc and bookkeeping per step" (3 candidates) reads ~4.5 s.
    extra_wall_per_candidate_s: float = 0.0


@dataclass
class DriverCosts:
    """Measured driver costs (bench/slurm/driver_costs.json), interpolated in memory rows."""

    rows: list            # suite evidence rows at each measured point, ascending
    snapshot_s: list      # VACUUM INTO seconds at those points
    merge_s: list         # merge_memory seconds at those points
    parse_s_per_line: float  # parse_squeue seconds per line (largest measured input)
    sbatch_s: float = 0.0         # one sbatch, driver-busy (squeue_cost_local.json)
    squeue_fixed_s: float = 0.0   # one squeue with one job id, driver-busy
    squeue_per_job_s: float = 0.0  # ... each further job id asked
    poll_interval_s: float = 1.0  # SlurmSettings::poll_interval_s (no command-line option)
    dispatch_s: float = 2.0       # sbatch to job start and end to squeue, Slurm's own part

    def _at(self, values: list, memory_rows: float) -> float:
        xs = self.rows
        if memory_rows <= xs[0]:
            return values[0]
        for i in range(1, len(xs)):
            if memory_rows <= xs[i]:
                t = (memory_rows - xs[i - 1]) / (xs[i] - xs[i - 1])
                return values[i - 1] + t * (values[i] - values[i - 1])
        # Past the last point: the power law of the last two points (merge grows ~quadratically).
        exponent = math.log(values[-1] / values[-2]) / math.log(xs[-1] / xs[-2])
        return values[-1] * (memory_rows / xs[-1]) ** exponent

    def snapshot(self, memory_rows: float) -> float:
        """Seconds of one snapshot_memory at `memory_rows` evidence rows."""
        return self._at(self.snapshot_s, memory_rows)

    def merge(self, memory_rows: float) -> float:
        """Seconds of one merge_memory into a suite memory of `memory_rows` evidence rows."""
        return self._at(self.merge_s, memory_rows)


def load_json(path: str):
    with open(path) as f:
        return json.load(f)


def fit_task_model(root: str = ROOT, baselines: str = DEFAULT_BASELINES) -> TaskModel:
    """Least squares of device s per candidate on eager ms over the served H200 problems.

    Sources: bench/torch/suite_l1_h200_s4.json (candidates, device_s per task) and
    ..._overhead.json (child_wall_s: the child process from start to end), eager ms from the
    baselines file (matched by task name). Outside-device wall is split into a fixed part and a
    per-candidate part by least squares too.
    """
    rows = load_json(os.path.join(root, "bench/torch/suite_l1_h200_s4.json"))["tasks"]
    overhead_file = os.path.join(root, "bench/torch/suite_l1_h200_s4_overhead.json")
    overhead = {t["task"]: t for t in load_json(overhead_file)["tasks"]}
    eager = {t["task"]: t["eager_ms"] for t in load_json(baselines)["tasks"] if t["level"] == 1}
    points = []
    for row in rows:
        if row.get("status") != "correct" or row["task"] not in eager:
            continue
        child = overhead[row["task"]]["child_wall_s"]
        points.append({"task": row["task"], "eager_ms": eager[row["task"]],
                       "candidates": row["candidates"], "device_s": row["device_s"],
                       "outside_s": child - row["device_s"]})
    xs = [p["eager_ms"] for p in points]
    ys = [p["device_s"] / p["candidates"] for p in points]
    slope, intercept = linear_fit(xs, ys)
    residuals = [math.log(y / max(intercept + slope * x, 1e-9)) for x, y in zip(xs, ys)]
    c_slope, c_intercept = linear_fit([p["candidates"] for p in points],
                                      [p["outside_s"] for p in points])
    return TaskModel(device_fixed_s=intercept, device_per_eager_ms_s=slope,
                     device_sigma=statistics.pstdev(residuals),
                     outside_fixed_s=c_intercept, compile_per_candidate_s=max(c_slope, 0.0),
                     fit_points=points)


def linear_fit(xs: list, ys: list) -> tuple:
    """Ordinary least squares y = slope * x + intercept; returns (slope, intercept)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def load_driver_costs(root: str = ROOT) -> DriverCosts:
    """Driver costs from bench/slurm/driver_costs.json; Slurm's dispatch latency from the
    executor overhead measured on the local Slurm (max_parallel_cpu.json: 1.36 s median per
    task), less what the driver itself spends there (snapshot and merge at a tiny memory, half a
    poll interval of detection delay on average)."""
    return load_driver_costs_from(root, "bench/slurm/driver_costs.json")


def load_driver_costs_from(root: str, name: str) -> DriverCosts:
    """As load_driver_costs, with the snapshot and merge seconds of bench/slurm/`name`."""
    measured = load_json(os.path.join(root, name))
    memory = sorted(measured["memory"], key=lambda m: m["suite_evidence_rows"])
    parse = max(measured["squeue_parse"], key=lambda p: p["lines"])
    costs = DriverCosts(rows=[m["suite_evidence_rows"] for m in memory],
                        snapshot_s=[m["snapshot_s_median"] for m in memory],
                        merge_s=[m["merge_s_median"] for m in memory],
                        parse_s_per_line=parse["parse_s_median"] / parse["lines"])
    slurm = load_json(os.path.join(root, "bench/slurm/squeue_cost_local.json"))
    costs.sbatch_s = slurm["sbatch_s_mean"]
    squeue_slope, squeue_intercept = linear_fit([q["jobs"] for q in slurm["squeue"]],
                                                [q["squeue_s_median"] for q in slurm["squeue"]])
    costs.squeue_fixed_s, costs.squeue_per_job_s = squeue_intercept, max(squeue_slope, 0.0)
    overhead = load_json(os.path.join(root, "bench/slurm/max_parallel_cpu.json"))
    median_overhead_s = overhead["overhead_s_per_task_max_parallel_1"]["median"]
    costs.dispatch_s = max(0.0, median_overhead_s - costs.poll_interval_s / 2
                           - costs.snapshot(0) - costs.merge(0))
    return costs


@dataclass
class SimTask:
    label: str
    eager_ms: float
    device_s: float
    wall_s: float


def make_tasks(eager_ms: list, model: TaskModel, assume: Assumptions, seed: int) -> list:
    """One SimTask per eager time, device and wall seconds drawn with `seed`."""
    rng = random.Random(seed)
    tasks = []
    for i, ms in enumerate(eager_ms):
        device = model.device_s(ms, assume.candidates, rng) * assume.device_scale
        wall = model.wall_s(device, assume.candidates) + assume.candidates * (
            assume.llm_s_per_candidate + assume.extra_wall_per_candidate_s)
        tasks.append(SimTask(f"t{i}", ms, device, wall))
    return tasks


def simulate(tasks: list, gpus: int, driver: DriverCosts, assume: Assumptions) -> dict:
    """The suite driver's loop (SlurmExecutor + the suite) on `gpus` GPUs, one GPU a job,
    --max-parallel = gpus. The driver is one serial thread: it snapshots and sbatch-es each
    job when a slot is free, then polls squeue (every poll_interval_s while nothing ended) and
    merges each ended job's memory before submitting more. Returns seconds and fractions.
    """
    pending = list(tasks)  # submitted in the suite's order (sorted by name there)
    now = 0.0
    busy = 0.0              # driver-busy seconds
    merge_busy = 0.0
    memory_rows = float(assume.initial_memory_rows)
    running = []            # heap of (when squeue shows the job ended, submission number, task)
    in_flight = 0
    alloc_s = 0.0           # seconds jobs held their GPU
    submitted = 0
    while pending or in_flight:
        while pending and in_flight < gpus:
            task = pending.pop(0)
            cost = driver.snapshot(memory_rows) + driver.sbatch_s * assume.slurm_command_scale
            now += cost
            busy += cost
            start = now + driver.dispatch_s / 2   # half the latency before the job starts
            end = start + task.wall_s
            heapq.heappush(running, (end + driver.dispatch_s / 2, submitted, task))
            submitted += 1
            in_flight += 1
            alloc_s += task.wall_s
        # One poll: squeue for every job in flight, then the ended ones merged one by one.
        squeue_s = driver.squeue_fixed_s + in_flight * driver.squeue_per_job_s
        cost = assume.slurm_command_scale * squeue_s + in_flight * driver.parse_s_per_line
        now += cost
        busy += cost
        ended = []
        while running and running[0][0] <= now:
            ended.append(heapq.heappop(running)[2])
        if not ended:
            next_end = running[0][0] if running else now
            # Sleeps poll_interval_s at a time until a poll sees an end.
            polls = max(1, math.ceil((next_end - now) / (driver.poll_interval_s + cost)))
            now += polls * driver.poll_interval_s + (polls - 1) * cost
            busy += (polls - 1) * cost
            continue
        for task in ended:
            merge = driver.merge(memory_rows)
            now += merge
            busy += merge
            merge_busy += merge
            memory_rows += assume.evidence_rows_per_job
            in_flight -= 1
    wall = now
    total_device = sum(t.device_s for t in tasks)
    return {"gpus": gpus, "tasks": len(tasks), "suite_wall_s": wall,
            "gpu_device_utilization": total_device / (gpus * wall) if wall else 0.0,
            "gpu_allocated_fraction": alloc_s / (gpus * wall) if wall else 0.0,
            "driver_busy_fraction": busy / wall if wall else 0.0,
            "driver_merge_fraction": merge_busy / wall if wall else 0.0,
            "final_memory_rows": int(memory_rows),
            "total_device_s": total_device, "total_job_wall_s": alloc_s,
            "lower_bound_s": max(alloc_s / gpus, max(t.wall_s for t in tasks))}


def simulate_split(tasks: list, gpus: int, drivers: int, driver: DriverCosts,
                   assume: Assumptions) -> dict:
    """`drivers` suite drivers, each with its own memory file, on disjoint task subsets (round
    robin) and gpus / drivers GPUs each; then their memories imported into one, one after the
    other (estimated with the merge's cost at the growing size: the same import_json).
    The suite's wall is the slowest driver's plus that import."""
    runs = [simulate(tasks[k::drivers], max(1, gpus // drivers), driver, assume)
            for k in range(drivers)]
    rows_each = max(r["final_memory_rows"] for r in runs)
    combine_s = sum(driver.merge(k * rows_each) for k in range(1, drivers))
    wall = max(r["suite_wall_s"] for r in runs) + combine_s
    total_device = sum(r["total_device_s"] for r in runs)
    return {"gpus": gpus, "drivers": drivers, "tasks": len(tasks), "suite_wall_s": wall,
            "combine_memories_s": combine_s,
            "gpu_device_utilization": total_device / (gpus * wall),
            "gpu_allocated_fraction": sum(r["total_job_wall_s"] for r in runs) / (gpus * wall),
            "driver_busy_fraction": max(r["driver_busy_fraction"] for r in runs),
            "driver_merge_fraction": max(r["driver_merge_fraction"] for r in runs),
            "final_memory_rows": rows_each * drivers,
            "total_device_s": total_device,
            "total_job_wall_s": sum(r["total_job_wall_s"] for r in runs),
            "lower_bound_s": max(sum(r["total_job_wall_s"] for r in runs) / gpus,
                                 max(t.wall_s for t in tasks))}


def saturation(tasks: list, driver: DriverCosts, assume: Assumptions, memory_rows: float) -> dict:
    """The N past which the driver's serial work per job outruns the jobs' arrival: N* =
    mean job wall / driver seconds per job (snapshot + sbatch + merge at `memory_rows`, polls
    aside), and the jobs in flight at which one poll (squeue + parse) takes a poll interval."""
    mean_wall = statistics.fmean(t.wall_s for t in tasks) + driver.dispatch_s
    per_job = driver.snapshot(memory_rows) + driver.sbatch_s * assume.slurm_command_scale \
        + driver.merge(memory_rows)
    per_line = assume.slurm_command_scale * driver.squeue_per_job_s + driver.parse_s_per_line
    fixed = assume.slurm_command_scale * driver.squeue_fixed_s
    poll_jobs = ((driver.poll_interval_s - fixed) / per_line) if per_line else math.inf
    return {"memory_rows": int(memory_rows), "driver_s_per_job": per_job,
            "saturating_gpus": mean_wall / per_job, "poll_saturating_jobs": poll_jobs}


def memory_limit(tasks: list, driver: DriverCosts, assume: Assumptions, gpus: int) -> float:
    """The suite-memory size (evidence rows) past which the driver's serial work per job
    (snapshot + sbatch + merge) exceeds mean job wall / `gpus`: beyond it, GPUs wait on the
    driver. Bisection over the interpolated costs (monotone in rows); 0 when even an empty
    memory is too slow, 1e9 when no size up to it is."""
    budget = (statistics.fmean(t.wall_s for t in tasks) + driver.dispatch_s) / gpus
    sbatch = driver.sbatch_s * assume.slurm_command_scale
    per_job = lambda rows: driver.snapshot(rows) + sbatch + driver.merge(rows)
    if per_job(0) > budget:
        return 0.0
    low, high = 0.0, 1e9
    if per_job(high) <= budget:
        return high
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if per_job(mid) <= budget else (low, mid)
    return low


def scenario(name: str, eager: list, model: TaskModel, driver: DriverCosts, assume: Assumptions,
             gpus_list: list, seed: int) -> dict:
    tasks = make_tasks(eager, model, assume, seed)
    return {"name": name, "tasks": len(tasks),
            "mean_task_device_s": statistics.fmean(t.device_s for t in tasks),
            "mean_task_wall_s": statistics.fmean(t.wall_s for t in tasks),
            "runs": [simulate(tasks, n, driver, assume) for n in gpus_list]}


def git_commit() -> str:
    out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baselines", default=DEFAULT_BASELINES)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--out-json", default=os.path.join(ROOT, "bench/slurm/cost_model.json"))
    parser.add_argument("--out-md", default=os.path.join(ROOT, "bench/slurm/cost_model.md"))
    args = parser.parse_args()
    model = fit_task_model(ROOT, args.baselines)
    driver = load_driver_costs()
    base = Assumptions()
    problems = load_json(args.baselines)["tasks"]
    all_eager = [t["eager_ms"] for t in problems]
    level3 = [t["eager_ms"] for t in problems if t["level"] == 3]
    gpus = [1, 8, 32, 128, 1000]
    scenarios = [
        scenario("all 250 (levels 1-3)", all_eager, model, driver, base, gpus, args.seed),
        scenario("level 3 (50)", level3, model, driver, base, gpus, args.seed),
        scenario("1000 jobs (the 250 x 4)", all_eager * 4, model, driver, base, [128, 1000],
                 args.seed),
    ]
    tasks250 = make_tasks(all_eager, model, base, args.seed)
    rows_per_job = base.evidence_rows_per_job
    sat = [saturation(tasks250, driver, base, rows)
           for rows in (0, 250 * rows_per_job, 1000 * rows_per_job, 50000)]
    limits = [{"gpus": n, "driver_s_per_job_budget":
               (statistics.fmean(t.wall_s for t in tasks250) + driver.dispatch_s) / n,
               "max_memory_rows": memory_limit(tasks250, driver, base, n)} for n in gpus]
    indexed = load_driver_costs_from(ROOT, "bench/slurm/driver_costs_dedupe_index.json")
    whole_file = load_driver_costs_from(ROOT, "bench/slurm/driver_costs_whole_file.json")
    jobs1000 = make_tasks(all_eager * 4, model, base, args.seed)
    remedies = []
    for label, costs, drivers in [("1 driver", driver, 1), ("4 drivers", driver, 4),
                                  ("16 drivers", driver, 16),
                                  ("1 driver, whole-file merge (before snapshot marks)",
                                   whole_file, 1),
                                  ("1 driver, dedupe index (what-if)", indexed, 1),
                                  ("16 drivers, dedupe index (what-if)", indexed, 16)]:
        run = simulate_split(jobs1000, 1000, drivers, costs, base)
        remedies.append({"name": "1000 jobs on 1000 GPUs: " + label, "runs": [run]})
    remedies.append({"name": "all 250 on 1000 GPUs: 1 driver, dedupe index (what-if)",
                     "runs": [simulate(tasks250, 1000, indexed, base)]})
    sensitivity = []
    for label, change in [("device s x2", {"device_scale": 2.0}),
                          ("device s x0.5", {"device_scale": 0.5}),
                          ("LLM 20 s per candidate", {"llm_s_per_candidate": 20.0}),
                          ("compile 4.5 s per candidate", {"extra_wall_per_candidate_s": 3.5}),
                          ("memory starts at 10k rows", {"initial_memory_rows": 10000}),
                          ("sbatch and squeue 10x slower", {"slurm_command_scale": 10.0}),
                          ("steps 1 (6 candidates)",
                           {"candidates": 6, "evidence_rows_per_job": 3})]:
        changed = dataclasses.replace(base, **change)
        result = scenario(label, all_eager, model, driver, changed, [32, 1000], args.seed)
        sensitivity.append(result)
    out = {"what": "kforge suite --executor slurm cost model (issue 23)",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "machine": f"{platform.node()}, {os.cpu_count()} cores", "commit": git_commit(),
           "seed": args.seed, "task_model": dataclasses.asdict(model),
           "driver_costs": dataclasses.asdict(driver), "assumptions": dataclasses.asdict(base),
           "scenarios": scenarios, "saturation_250_tasks": sat,
           "memory_limit_by_gpus": limits, "remedies": remedies, "sensitivity": sensitivity}
    with open(args.out_json, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    with open(args.out_md, "w") as f:
        f.write(render_md(out))


def render_md(out: dict) -> str:
    """The markdown tables of cost_model.json."""
    m = out["task_model"]
    assumed = ", ".join(f"{k} {v}" for k, v in out["assumptions"].items())
    lines = [
        "# What a KernelBench suite costs on N GPUs (`bench/slurm/cost_model.py`)", "",
        f"Machine (simulation and driver measurements): {out['machine']}; {out['date']}; "
        f"commit {out['commit']}; seed {out['seed']}. Inputs: kernelbench_eager_h200.json, "
        "bench/torch/suite_l1_h200_s4*.json (H200), driver_costs*.json, "
        "squeue_cost_local.json, max_parallel_cpu.json (this machine). Wall h: simulated; "
        "bound h: max(job-hours / GPUs, longest job); GPU device util: device s / (GPUs x "
        "wall); allocated: job s / (GPUs x wall).", "",
        f"Task model (H200, fitted to {len(m['fit_points'])} served level-1 problems): "
        f"device s = candidates x ({m['device_fixed_s']:.2f} + "
        f"{m['device_per_eager_ms_s']:.3f} x eager ms), sigma {m['device_sigma']:.2f} (log); "
        f"wall = {m['outside_fixed_s']:.1f} + {m['compile_per_candidate_s']:.2f} x candidates "
        f"+ device s. Assumptions: {assumed}.", "",
        "| suite | GPUs | wall h | bound h | GPU device util | GPU allocated | driver busy "
        "| merge share |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in out["scenarios"] + out["remedies"] + out["sensitivity"]:
        for r in s["runs"]:
            lines.append(
                f"| {s['name']} | {r['gpus']} | {r['suite_wall_s'] / 3600:.2f} | "
                f"{r['lower_bound_s'] / 3600:.2f} | {r['gpu_device_utilization']:.1%} | "
                f"{r['gpu_allocated_fraction']:.1%} | {r['driver_busy_fraction']:.1%} | "
                f"{r['driver_merge_fraction']:.1%} |")
    lines += ["", "| suite memory rows | driver s per job | GPUs at which the driver saturates "
              "| jobs at which one poll takes 1 s |", "| ---: | ---: | ---: | ---: |"]
    for s in out["saturation_250_tasks"]:
        lines.append(f"| {s['memory_rows']} | {s['driver_s_per_job']:.3f} | "
                     f"{s['saturating_gpus']:.0f} | {s['poll_saturating_jobs']:.3g} |")
    lines += ["", "| GPUs | driver s per job it can afford | suite memory rows past which the "
              "driver is the bottleneck |", "| ---: | ---: | ---: |"]
    for g in out["memory_limit_by_gpus"]:
        lines.append(f"| {g['gpus']} | {g['driver_s_per_job_budget']:.3f} | "
                     f"{g['max_memory_rows']:.0f} |")
    lines += ["", "Reproduce: `kforge_bench_driver_costs --evidence EXPORT.json --job-rows 18` "
              "(and with `--dedupe-index`) -> driver_costs*.json; `bench/slurm/squeue_cost.sh "
              "1000` (root, local Slurm) -> squeue_cost_local.json; "
              "`python3 bench/slurm/cost_model.py`."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
