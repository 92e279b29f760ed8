#!/usr/bin/env python3
"""Ingest cost of PyTorch problems, and a suite's time outside evaluation (issue 18).

  ingest_bench.py ingest --out OUT.json [--kforge K] [--before-kforge K0 --before-home H0]
                         [--time-limit-s S] FILE...
      Per problem: `kforge task --json FILE` (one Python process per problem: Python start,
      import torch, derivation), for K and optionally for an older build K0 whose Python side is
      under H0 (KFORGE_HOME); then every FILE in one `derive --batch` (one import of torch) with
      each problem's own seconds and CPU seconds. Also `import torch` alone, first in this
      environment, then (after the problems) in kforge's, with its bytecode cache.
  ingest_bench.py suite --out OUT.json --suite-dir DIR [--kforge K] -- SUITE_ARGUMENTS...
      Runs `kforge suite SUITE_ARGUMENTS --suite-dir DIR` and splits its wall time: the
      derivation (SUITE_DIR/derived/derivation.json), each child's process overhead (start, task
      load, workers, reports: child wall - the run's own wall_s), the run's prepare (reference
      worker start, reference outputs, task self-test: events.jsonl task_prepared), compile and
      search bookkeeping (the rest of the run's wall_s), and evaluation (the run's device_s,
      candidate rungs 0-2, plus its final rung), plus the suite's own time.
  ingest_bench.py reanalyze --out OUT.json --suite-dir DIR SUITE.json
      The split again from what `suite` wrote and the suite directory.
  ingest_bench.py table IN.json...
      Markdown tables of what the others wrote.

Standard library only; CPU seconds are user + system of the children (all threads), which on a
shared host says more than wall time. The Python that runs the batch is found as kforge finds it:
$KFORGE_PYTHON, else python3 or /usr/bin/python3, whichever can import torch.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv, env=None, timeout_s=900):
    """(CompletedProcess, wall seconds, CPU seconds of it and its descendants)."""
    cpu, start = children_cpu_s(), time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout_s)
    return result, time.perf_counter() - start, children_cpu_s() - cpu


def torch_python():
    candidates = [os.environ["KFORGE_PYTHON"]] if os.environ.get("KFORGE_PYTHON") else \
        ["python3", "/usr/bin/python3"]
    for python in candidates:
        probe = subprocess.run([python, "-c", "import importlib.util, sys; sys.exit("
                                "importlib.util.find_spec('torch') is None)"], capture_output=True)
        if probe.returncode == 0:
            return python
    sys.exit(f"ingest_bench: no Python with torch among {candidates}")


def provenance(python):
    versions = subprocess.run([python, "-c", "import sys, torch; print(torch.__version__, "
                               "sys.version.split()[0])"], capture_output=True, text=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                  if line.startswith("model name")), platform.processor())
    return {"date": datetime.date.today().isoformat(), "commit": commit, "host": platform.node(),
            "cpu": f"{model}, {os.cpu_count()} cores", "torch_python": versions.stdout.strip(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def kforge_task(kforge, path, home=None):
    env = dict(os.environ, KFORGE_PYTHON=torch_python())
    if home:
        env["KFORGE_HOME"] = home
        env["KFORGE_INPUTS_LIB"] = str(pathlib.Path(kforge).resolve().parent /
                                       "libkforge_inputs.so")
    result, wall_s, cpu_s = timed([kforge, "task", "--json", path], env)
    return {"ok": result.returncode == 0, "wall_s": round(wall_s, 3), "cpu_s": round(cpu_s, 3)}


def kforge_python_env(**extra):
    """This environment as kforge gives it to its Python processes (src/task/torch_task.h,
    torch_environment): the bytecode cache folder as PYTHONPYCACHEPREFIX, and no
    PYTHONDONTWRITEBYTECODE, unless KFORGE_PYCACHE=off or a prefix of one's own is set."""
    env = dict(os.environ, **extra)
    chosen = os.environ.get("KFORGE_PYCACHE")
    if "PYTHONPYCACHEPREFIX" in env or chosen == "off":
        return env
    folder = chosen or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                    os.path.join(os.path.expanduser("~"), ".cache"),
                                    "kforge", "pycache")
    env["PYTHONPYCACHEPREFIX"] = folder
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def batch(kforge, paths, time_limit_s):
    """Every path in one `derive --batch`: totals, time to the first line, each problem's line."""
    env = kforge_python_env(PYTHONPATH=str(ROOT / "python"),
                            KFORGE_INPUTS_LIB=str(pathlib.Path(kforge).resolve().parent /
                                                  "libkforge_inputs.so"))
    argv = [torch_python(), "-m", "kforge_torch", "derive", "--batch", "--no-capacity-check",
            "--time-limit-s", str(time_limit_s), *paths]
    cpu, start = children_cpu_s(), time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    lines, first_line_s = [], None
    for line in process.stdout:
        first_line_s = first_line_s or time.perf_counter() - start
        lines.append(json.loads(line))
    process.wait()
    wall_s, cpu_s = time.perf_counter() - start, children_cpu_s() - cpu
    startup_s = first_line_s - lines[0]["seconds"] if lines else None
    return {"wall_s": round(wall_s, 3), "cpu_s": round(cpu_s, 3),
            "startup_s": round(startup_s, 3) if startup_s is not None else None,
            "problems": {line["file"]: {"ok": line["ok"], "seconds": line["seconds"],
                                        "cpu_s": line.get("cpu_s"),
                                        "family": (line.get("task") or {}).get("family")}
                         for line in lines}}


def ingest(arguments):
    python = torch_python()
    paths = [str(pathlib.Path(p).resolve()) for p in arguments.files]
    _, import_wall_s, import_cpu_s = timed([python, "-c", "import torch"])
    record = {"what": "ingest", **provenance(python),
              "import_torch": {"wall_s": round(import_wall_s, 3), "cpu_s": round(import_cpu_s, 3)},
              "problems": []}
    for path in paths:
        row = {"problem": pathlib.Path(path).name}
        if arguments.before_kforge:
            row["before_task"] = kforge_task(arguments.before_kforge, path, arguments.before_home)
        row["after_task"] = kforge_task(arguments.kforge, path)
        print(row, file=sys.stderr)
        record["problems"].append(row)
    # `import torch` again, in kforge's environment, after the problems above filled its cache.
    _, import_wall_s, import_cpu_s = timed([python, "-c", "import torch"], kforge_python_env())
    record["import_torch_kforge_env"] = {"wall_s": round(import_wall_s, 3),
                                         "cpu_s": round(import_cpu_s, 3)}
    record["batch"] = batch(arguments.kforge, paths, arguments.time_limit_s)
    for row, path in zip(record["problems"], paths):
        row["in_batch"] = record["batch"]["problems"].pop(path, None)
    del record["batch"]["problems"]
    record["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return record


def _event_time(event):
    return datetime.datetime.strptime(event["time"], "%Y-%m-%dT%H:%M:%SZ").timestamp()


def run_breakdown(run_dir):
    """(the run's wall_s, evaluation seconds, prepare seconds, the prepare's phases: name ->
    seconds) from its result.json and
    events.jsonl. Evaluation is the budget's device_s (candidate rungs 0-2) plus the final rung
    (reference and best interleaved), which device_s leaves out: the time from the event before
    the "final" event to it (events are stamped to the second)."""
    result = json.loads((run_dir / "result.json").read_text())
    spent = result.get("budget", {}).get("spent", {})
    prepare_s, final_s, previous, phases = 0.0, 0.0, None, {}
    events = run_dir / "events.jsonl"
    for line in events.read_text().splitlines() if events.exists() else []:
        event = json.loads(line)
        if event.get("event") == "task_prepared":
            prepare_s += event.get("seconds", 0.0)
            phases = event.get("phases", {})
        if event.get("event") == "final" and previous is not None:
            final_s += _event_time(event) - _event_time(previous)
        previous = event
    return (spent.get("wall_s", result.get("wall_s", 0.0)), spent.get("device_s", 0.0) + final_s,
            prepare_s, phases)


def suite(arguments):
    python = torch_python()
    suite_dir = pathlib.Path(arguments.suite_dir).resolve()
    argv = [arguments.kforge, "suite", *arguments.suite_arguments, "--suite-dir", str(suite_dir)]
    record = {"what": "suite", **provenance(python), "command": " ".join(argv[1:])}
    result, total_s, cpu_s = timed(argv, dict(os.environ, KFORGE_PYTHON=python), timeout_s=None)
    record.update(exit_code=result.returncode, total_wall_s=round(total_s, 3),
                  total_cpu_s=round(cpu_s, 3))
    return analyze(record, suite_dir)


def reanalyze(arguments):
    """The breakdown again from a suite JSON this script wrote (its total time and provenance)
    and the suite directory as it is now."""
    record = json.loads(pathlib.Path(arguments.record).read_text())
    return analyze(record, pathlib.Path(arguments.suite_dir).resolve())


# Which parts of a suite's time are evaluation. The evaluation plane (DESIGN.md, "Evaluation
# plane") builds, gates and times candidates and profiles the best, against a reference whose
# outputs and times it computes: so the reference's preparation, the builds the search waits for,
# the candidates' worker time, the final rung and the profile are evaluation. Outside it: the
# derivation (ingest), each child's start (task load, workers, probes) and end (reports), the
# search's own bookkeeping (policy, memory, journal: the search phase less the workers' time) and
# the suite's own time.
EVALUATION_PARTS = ("prepare", "compile_wait", "candidates", "final", "profile",
                    "reference_check_work")
OUTSIDE_PARTS = ("derivation", "child_start", "child_end", "search_bookkeeping",
                 "reference_check_process", "suite_own")


def check_breakdown(report_path):
    """Evaluation seconds of a `kforge task --check --report` file: the check's own wall time
    (its report's wall_s: workers' start, the reference's preparation and its timing) less its
    workers' start. A report without wall_s: its prepare phases but the workers' start plus its
    timed calls (warm-up and the harness's time between calls left out: an underestimate)."""
    if not report_path.exists():
        return 0.0
    report = json.loads(report_path.read_text())
    phases = report.get("phases", {})
    if "wall_s" in report:
        return max(0.0, report["wall_s"] - phases.get("workers", 0.0))
    work = sum(v for k, v in phases.items() if k != "workers")
    return work + sum(report.get("samples_ms", [])) / 1000.0


def analyze(record, suite_dir):
    """Adds the split of record["total_wall_s"] over the parts of the suite at `suite_dir`:
    record["seconds"] (part -> s), and the share outside evaluation. Runs that recorded their
    phases (result.json phases_s, startup_s: kforge at 2026-12-06 and later) are split
    precisely; older ones as before (compile waits inside "search_bookkeeping")."""
    total_s = record["total_wall_s"]
    derivation_path = suite_dir / "derived" / "derivation.json"
    derivation = json.loads(derivation_path.read_text()) if derivation_path.exists() else {}
    parts = dict.fromkeys(EVALUATION_PARTS + OUTSIDE_PARTS, 0.0)
    parts["derivation"] = derivation.get("batch_wall_s", 0.0)
    rows = json.loads((suite_dir / "suite.json").read_text())["tasks"]
    record["tasks"] = []
    prepare_phases = {}
    for row in rows:
        entry = {"task": row["name"], "status": row["status"], "child_wall_s": row["wall_s"]}
        run_dir = pathlib.Path(row["run_dir"]) if row.get("run_dir") else None
        # Finished by an earlier invocation: no time in this one, unless the record sums the
        # invocations (bench/torch/suite_device.sh; a resumed row's wall_s is then its run's
        # own, so its child's start is not counted).
        if row.get("resumed") and "invocations" not in record:
            entry["resumed"] = True
        elif run_dir is not None and (run_dir / "result.json").exists():
            result = json.loads((run_dir / "result.json").read_text())
            wall_s, device_s, prepare_s, phases = run_breakdown(run_dir)
            entry.update(run_wall_s=wall_s, device_s=device_s, prepare_s=prepare_s,
                         prepare_phases=phases)
            for name, seconds in phases.items():
                prepare_phases[name] = prepare_phases.get(name, 0.0) + seconds
            run_phases = result.get("phases_s") or {}
            # The workers' start inside the prepare (the torch reference worker's import of
            # torch, CUDA's start) is the child's start, not evaluation.
            workers = phases.get("workers", 0.0)
            startup = result.get("startup_s", 0.0) + workers
            parts["child_start"] += startup
            parts["prepare"] -= workers
            parts["child_end"] += max(0.0, row["wall_s"] - wall_s - result.get("startup_s", 0.0))
            if run_phases:
                entry["phases_s"] = run_phases
                candidates = result.get("budget", {}).get("spent", {}).get("device_s", 0.0)
                search = run_phases.get("search", 0.0)
                parts["prepare"] += run_phases.get("prepare", 0.0)
                parts["compile_wait"] += run_phases.get("compile_wait", 0.0)
                parts["final"] += run_phases.get("final", 0.0)
                parts["profile"] += run_phases.get("profile", 0.0)
                parts["candidates"] += min(candidates, search)
                parts["search_bookkeeping"] += max(0.0, search - candidates)
            else:
                parts["prepare"] += prepare_s
                parts["candidates"] += device_s
                parts["search_bookkeeping"] += max(0.0, wall_s - device_s - prepare_s)
        elif row.get("reference_check") == "ran" or row.get("exit") == "reference check failed":
            # A problem no generator serves: `kforge task --check` ran its reference (issue 18).
            work = check_breakdown(suite_dir / "checks" / f"{row['name']}.json")
            entry.update(reference_check_s=row["wall_s"], reference_check_work_s=round(work, 3))
            parts["reference_check_work"] += min(work, row["wall_s"])
            parts["reference_check_process"] += max(0.0, row["wall_s"] - work)
        else:
            parts["child_start"] += row["wall_s"]  # a child that ended without a run
        record["tasks"].append(entry)
    parts["suite_own"] = total_s - sum(parts.values())
    record["seconds"] = {k: round(v, 3) for k, v in parts.items()}
    record["prepare_phases_s"] = {k: round(v, 3) for k, v in prepare_phases.items()}
    outside = sum(parts[k] for k in OUTSIDE_PARTS)
    record["outside_evaluation_s"] = round(outside, 3)
    record["outside_evaluation_fraction"] = round(outside / total_s, 4) if total_s else None
    record["derived_problems"] = derivation.get("problems", [])
    return record


def table(paths):
    for path in paths:
        record = json.loads(pathlib.Path(path).read_text())
        print(f"\n{path}: {record['date']}, commit {record['commit']}, {record['cpu']}, "
              f"torch/Python {record['torch_python']}, load {record['load_average_at_start']}\n")
        if record["what"] == "ingest":
            _ingest_table(record)
        else:
            _suite_table(record)


def _cell(run):
    return "-" if not run else f"{run['wall_s']:.2f} / {run['cpu_s']:.2f}"


def _ingest_table(record):
    print("| problem | before: kforge task (wall / CPU s) | after: kforge task | in one batch "
          "(wall / CPU s) | family |")
    print("| --- | ---: | ---: | ---: | --- |")
    for row in record["problems"]:
        batch = row.get("in_batch") or {}
        seconds = f"{batch['seconds']:.2f} / {batch['cpu_s'] or 0:.2f}" if batch else "-"
        family = batch.get("family") or ("-" if batch.get("ok") else "error")
        print(f"| {row['problem']} | {_cell(row.get('before_task'))} | "
              f"{_cell(row.get('after_task'))} | {seconds} | {family} |")
    totals = {key: sum(r[key]["wall_s"] for r in record["problems"] if r.get(key))
              for key in ("before_task", "after_task")}
    b = record["batch"]
    print(f"\nimport torch alone: {record['import_torch']['wall_s']:.2f} s wall, "
          f"{record['import_torch']['cpu_s']:.2f} s CPU. Sum of `kforge task`: before "
          f"{totals['before_task']:.1f} s, after {totals['after_task']:.1f} s; one batch: "
          f"{b['wall_s']:.1f} s wall ({b['cpu_s']:.1f} s CPU), of which startup "
          f"{b['startup_s']} s.")


def _suite_table(record):
    total = record["total_wall_s"]
    words = record["command"].split()
    files = [w for w in words if w.endswith(".py")]
    shown = " ".join(w for w in words if not w.endswith(".py"))
    print(f"`kforge {shown}` over {len(files)} problem files: {total:.1f} s, exit "
          f"{record['exit_code']}\n" if files else
          f"`kforge {record['command']}`: {total:.1f} s, exit {record['exit_code']}\n")
    print("| part | seconds | share | |")
    print("| --- | ---: | ---: | --- |")
    for part, seconds in record["seconds"].items():
        kind = "outside" if part in OUTSIDE_PARTS else "evaluation"
        print(f"| {part} | {seconds:.1f} | {100 * seconds / total:.1f}% | {kind} |")
    print(f"\noutside evaluation: {100 * record['outside_evaluation_fraction']:.1f}%")
    if record.get("prepare_phases_s"):
        print("\nprepare, by phase (all runs): " + ", ".join(
            f"{name} {seconds:.1f} s" for name, seconds in record["prepare_phases_s"].items()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("ingest")
    one.add_argument("--out", required=True)
    one.add_argument("--kforge", default=str(ROOT / "build" / "release" / "kforge"))
    one.add_argument("--before-kforge")
    one.add_argument("--before-home")
    one.add_argument("--time-limit-s", type=float, default=60.0)
    one.add_argument("files", nargs="+")
    many = commands.add_parser("suite")
    many.add_argument("--out", required=True)
    many.add_argument("--suite-dir", required=True)
    many.add_argument("--kforge", default=str(ROOT / "build" / "release" / "kforge"))
    many.add_argument("suite_arguments", nargs=argparse.REMAINDER)
    again = commands.add_parser("reanalyze")
    again.add_argument("--out", required=True)
    again.add_argument("--suite-dir", required=True)
    again.add_argument("record", help="a JSON that `suite` wrote")
    show = commands.add_parser("table")
    show.add_argument("files", nargs="+")
    arguments = parser.parse_args()
    if arguments.command == "table":
        return table(arguments.files)
    if arguments.command == "suite":
        arguments.suite_arguments = [a for a in arguments.suite_arguments if a != "--"]
    record = {"ingest": ingest, "suite": suite, "reanalyze": reanalyze}[arguments.command](arguments)
    pathlib.Path(arguments.out).write_text(json.dumps(record, indent=1) + "\n")
    table([arguments.out])


if __name__ == "__main__":
    main()
