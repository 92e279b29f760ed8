"""KernelBench's own verdict on kforge's solution.py files (issue 19's target), on a GPU machine.

For each finished run directory of a PyTorch problem (`kforge optimize PROBLEM.py --backend cuda`
wrote RUN/solution.py): KernelBench's static checker (backend cuda, fp32), then
`eval_kernel_against_ref` (5 correctness trials at fp32 tolerance, its cuda-event timing with L2
cleared, the reference timed the same way), beside kforge's own final-rung medians from
result.json. Writes one JSON object: machine, PyTorch, per run the verdicts, KernelBench's mean
times (ms) and the ratio of KernelBench's time of the solution to kforge's time of the kernel
(the target: within 5%, or the difference explained; KernelBench times the whole forward, Python
and output allocation included, and reports a mean, kforge the kernel call and a median).

  python3 bench/torch/solution_check.py --harness PATH/TO/kernelbench/harness \\
      --out solution_check.json RUN_DIR...

The harness is read from where it lies (never copied into kforge). Its package imports
modules that only its LLM-querying and progress-bar code uses (openai, litellm, dotenv, tqdm,
requests); where one is not installed, an empty module of that name is put in its place and
the JSON lists it under `harness_placeholders` (eval_kernel_against_ref uses none of them).
pydantic is used by eval.py only as the record class of its result (KernelExecResult: fields
with defaults, set by keyword, read as attributes); where it is absent (the H200 machine has no
pydantic and no pip), a record class of that behaviour stands in, without pydantic's validation,
and is listed as a placeholder too. numpy and torch are needed for real.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import importlib
import importlib.util
import json
import pathlib
import sys
import time
import types

# Imported by kernelbench/utils.py or eval.py for what the evaluation does not run.
_UNUSED_BY_EVAL = {
    "openai": {"OpenAI": None},
    "litellm": {"completion": None},
    "dotenv": {"load_dotenv": lambda *args, **kwargs: False},
    "tqdm": {"tqdm": lambda iterable=None, *args, **kwargs: iterable},
    "requests": {},
}


class _RecordModel:
    """Stands in for pydantic.BaseModel as eval.py uses it: each annotated class attribute is a
    field whose default is copied into every instance (a dict default is not shared), keyword
    arguments set fields, and a keyword that is not a field is a TypeError as in pydantic."""

    def __init__(self, **fields):
        defaults = {}
        for klass in reversed(type(self).__mro__):
            for name in getattr(klass, "__annotations__", {}):
                defaults[name] = copy.deepcopy(getattr(klass, name, None))
        unknown = set(fields) - set(defaults)
        if unknown:
            raise TypeError(f"{type(self).__name__}: no field {sorted(unknown)}")
        defaults.update(fields)
        self.__dict__.update(defaults)


def import_harness(harness: pathlib.Path):
    """(eval module, static checker module, placeholders put in) from the harness folder."""
    placeholders = []
    for name, attributes in _UNUSED_BY_EVAL.items():
        if importlib.util.find_spec(name) is None:
            module = types.ModuleType(name)
            module.__dict__.update(attributes)
            sys.modules[name] = module
            placeholders.append(name)
    if importlib.util.find_spec("pydantic") is None:
        sys.modules["pydantic"] = types.ModuleType("pydantic")
        sys.modules["pydantic"].BaseModel = _RecordModel
        placeholders.append("pydantic (record class only)")
    sys.path.insert(0, str(harness))
    for needed in ("numpy", "torch"):
        if importlib.util.find_spec(needed) is None:
            sys.exit(f"solution_check: KernelBench's eval needs {needed}, which is not installed")
    evaluation = importlib.import_module("kernelbench.eval")
    checker = importlib.import_module("kernelbench.kernel_static_checker")
    return evaluation, checker, placeholders


def kforge_times(run: pathlib.Path) -> dict:
    """kforge's final-rung medians (ms) and speedup from RUN/result.json."""
    result = json.loads((run / "result.json").read_text())
    final = result.get("final") or {}
    return {"best": (result.get("best") or {}).get("id"),
            "best_median_ms": (final.get("best") or {}).get("median_ms"),
            "reference_median_ms": (final.get("reference") or {}).get("median_ms"),
            "speedup": (final.get("speedup") or {}).get("speedup")}


def check_run(run: pathlib.Path, evaluation, checker, args, torch) -> dict:
    derived = json.loads((run / "reference.torch.json").read_text())
    problem = run / pathlib.Path(derived["problem"]).name  # `kforge optimize` keeps a copy
    if not problem.is_file():  # a suite's run: the bundle holds it, else where the task named
        bundled = run / "bundle" / problem.name
        problem = bundled if bundled.is_file() else pathlib.Path(derived["problem"])
    solution = (run / "solution.py").read_text()
    row = {"run": str(run), "problem": problem.name, "family": derived.get("family"),
           "kforge": kforge_times(run)}
    valid, errors, warnings = checker.validate_kernel_static(solution, backend="cuda",
                                                             precision="fp32")
    row["static_check"] = {"valid": valid, "errors": errors, "warnings": warnings}
    started = time.time()
    result = evaluation.eval_kernel_against_ref(
        problem.read_text(), solution, seed_num=42, num_correct_trials=args.correct_trials,
        num_perf_trials=args.perf_trials, measure_performance=True,
        timing_method=args.timing_method, build_dir=str(args.build_dir / run.name),
        device=torch.device("cuda:0"), backend="cuda", precision=torch.float32)
    row["eval_s"] = round(time.time() - started, 1)
    if result is None:
        row["kernelbench"] = {"error": "eval_kernel_against_ref returned None (a build lock "
                                       "or missing file: retry)"}
        return row
    kb = {"compiled": result.compiled, "correctness": result.correctness,
          "metadata": {k: str(v) for k, v in result.metadata.items()},
          "mean_ms": result.runtime, "stats_ms": result.runtime_stats,
          "reference_mean_ms": result.ref_runtime, "reference_stats_ms": result.ref_runtime_stats}
    if result.runtime > 0 and result.ref_runtime > 0:
        kb["speedup"] = result.ref_runtime / result.runtime
    best_ms = row["kforge"]["best_median_ms"]
    if result.runtime > 0 and best_ms:
        kb["solution_over_kforge_kernel"] = result.runtime / best_ms
        kb["within_5_percent"] = abs(result.runtime / best_ms - 1.0) <= 0.05
    row["kernelbench"] = kb
    return row


def prebuild(runs, build_dir: pathlib.Path) -> dict:
    """Imports every run's solution.py at once, each in its own process with TORCH_EXTENSIONS_DIR
    at the folder its evaluation will use, so the load_inline builds (about a minute each on the
    H200, mostly one nvcc and one g++ process) overlap; the evaluation then finds each build done
    (same extension name, same sources) and only loads it. Returns {run name: seconds, or the
    error's last line}; a failed build is left for the evaluation to report as its own."""
    import os
    import subprocess
    jobs = {}
    started = time.time()
    for run in runs:
        solution = run / "solution.py"
        if not solution.is_file():
            continue
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(build_dir / run.resolve().name),
                   MAX_JOBS="2")
        code = ("import importlib.util, sys\n"
                "spec = importlib.util.spec_from_file_location('kforge_prebuilt', sys.argv[1])\n"
                "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n")
        jobs[run.resolve().name] = subprocess.Popen(
            [sys.executable, "-c", code, str(solution.resolve())], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    outcome = {}
    for name, job in jobs.items():
        _, err = job.communicate()
        outcome[name] = round(time.time() - started, 1) if job.returncode == 0 else \
            (err.strip().splitlines() or ["exit %d" % job.returncode])[-1][:300]
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=pathlib.Path, help="finished run directories")
    parser.add_argument("--harness", type=pathlib.Path, required=True,
                        help="KernelBench's harness folder (holding kernelbench/eval.py)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="JSON to write")
    parser.add_argument("--correct-trials", type=int, default=5)
    parser.add_argument("--perf-trials", type=int, default=100)
    parser.add_argument("--timing-method", default="cuda_event")
    parser.add_argument("--build-dir", type=pathlib.Path, default=None,
                        help="load_inline build folders (default OUT's folder/torch_extensions)")
    parser.add_argument("--reference-fp32", action="store_true",
                        help="compute in strict fp32 in this process (torch.backends "
                             "cudnn.allow_tf32 and cuda.matmul.allow_tf32 off): PyTorch lets "
                             "cuDNN convolutions use TF32 by default, so KernelBench's reference "
                             "of a convolution is TF32-rounded unless this is set")
    parser.add_argument("--no-prebuild", action="store_true",
                        help="build each solution inside its evaluation only (default: build "
                             "them all first, in parallel processes, into the folders the "
                             "evaluation then loads from)")
    args = parser.parse_args()
    args.build_dir = args.build_dir or args.out.resolve().parent / "torch_extensions"
    evaluation, checker, placeholders = import_harness(args.harness.resolve())
    import torch
    if args.reference_fp32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    prebuilt = {} if args.no_prebuild else prebuild(args.runs, args.build_dir)
    report = {"prebuild_s": prebuilt, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "python": sys.version.split()[0], "harness": str(args.harness.resolve()),
              "harness_placeholders": placeholders,
              "tf32": {"cudnn": torch.backends.cudnn.allow_tf32,
                       "matmul": torch.backends.cuda.matmul.allow_tf32},
              "runs": []}
    for run in args.runs:
        missing = [f for f in ("solution.py", "result.json", "reference.torch.json")
                   if not (run / f).is_file()]
        if missing:
            report["runs"].append({"run": str(run), "error": f"missing {', '.join(missing)}"})
            continue
        report["runs"].append(check_run(run.resolve(), evaluation, checker, args, torch))
        args.out.write_text(json.dumps(report, indent=1))  # after each run: a kill keeps some
    args.out.write_text(json.dumps(report, indent=1))
    for row in report["runs"]:
        kb = row.get("kernelbench", {})
        print(f"{row.get('problem', row['run'])}: static {row.get('static_check', {}).get('valid')}"
              f", correct {kb.get('correctness')}, KernelBench {kb.get('mean_ms')} ms vs kforge "
              f"{row.get('kforge', {}).get('best_median_ms')} ms "
              f"(ratio {kb.get('solution_over_kforge_kernel')}), {row.get('error', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
