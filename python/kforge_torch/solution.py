"""`solution.py` of a finished run: a KernelBench-format `ModelNew` that runs the run's best
kernel (`python3 -m kforge_torch solution RUN_DIR [-o FILE] [--include-dir DIR]...`; kforge's
`kforge export RUN_DIR --format kernelbench` and the end of `kforge optimize PROBLEM.py` call it).

The file stands alone (PyTorch is all it imports): the problem's module-level code and Model's
constructor copied (solution_problem.py), the kernel with kforge's headers written in and a binding
built by torch.utils.cpp_extension.load_inline (solution_source.py), and a forward that views the
module's tensors in the kernel's signature shapes (solution_plan.py). docs/torch_solutions.md.

Inputs, from RUN_DIR: reference.torch.json (the derived task), result.json (the run finished;
its best and the kernel's file), run.json (the backend), the problem file (RUN_DIR's copy, else
the derived task's `problem`; its sha256 must be the task's).

A run whose best is already a ModelNew module (`--language cuda|triton`: best.py) has its
solution in hand: solution.py is that module as it was evaluated, byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from .solution_plan import make_plan
from .solution_problem import problem_parts
from .solution_source import BUILDS, build_for, solution_sources
from .solution_template import render

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent  # python/kforge_torch -> repo


class ExportError(ValueError):
    """A run directory that cannot give a solution; the message names the file and why."""


def default_include_dirs() -> List[Path]:
    """kforge's include folders in a source checkout: include/ (the kernel ABI) and kernels/
    (the built-in kernels' shared libraries), as src/common/paths.h kernel_include_dirs()."""
    return [_PACKAGE_ROOT / "include", _PACKAGE_ROOT / "kernels"]


def solution_text(run_dir: Path, include_dirs: Sequence[Path]) -> str:
    """The text of solution.py for the finished run in `run_dir`; ExportError when the run is
    not finished, has no best, is not a PyTorch problem's, or its problem file changed."""
    derived = _json(run_dir / "reference.torch.json",
                    "not a PyTorch problem's run (kforge writes it for a problem file or a TOML "
                    "task with [reference] torch)")
    result = _json(run_dir / "result.json", "the run has not finished (result.json is written "
                   "last); resume it with `kforge optimize --resume`")
    run = _json(run_dir / "run.json", "not a run directory")
    best = result.get("best")
    if not isinstance(best, dict):
        raise ExportError(f"{run_dir / 'result.json'}: the run has no best kernel (no candidate "
                          f"was correct), so there is nothing to export")
    backend = str(run.get("backend", ""))
    if backend not in BUILDS:
        raise ExportError(f"{run_dir / 'run.json'}: backend {backend!r}: a solution is written "
                          f"for {', '.join(BUILDS)}")
    model_new = _model_new_path(run_dir, best)
    if model_new is not None:
        _problem(run_dir, derived)  # it was checked against this module: refused if it changed
        return model_new.read_text()
    kernel_path = _kernel_path(run_dir, best)
    problem_path, problem_source = _problem(run_dir, derived)
    try:
        plan = make_plan(derived)
        parts = problem_parts(problem_source, str(problem_path))
    except ValueError as e:
        raise ExportError(f"{run_dir / 'reference.torch.json'}: {e}") from None
    kernel = kernel_path.read_text()
    build = build_for(kernel, BUILDS[backend])
    sources = solution_sources(kernel, build, include_dirs, str(derived.get("name", "task")),
                               str(best.get("id", "best")))
    return render(_header(run_dir, derived, result, best, backend, problem_path, kernel_path),
                  parts, sources, build, plan)


def write_solution(run_dir: Path, output: Path, include_dirs: Sequence[Path]) -> Path:
    """Writes solution_text(run_dir) to `output` (atomically: a temporary file renamed) and
    returns `output`."""
    text = solution_text(run_dir, include_dirs)
    temporary = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, output)
    return output


def _json(path: Path, missing: str) -> dict:
    if not path.is_file():
        raise ExportError(f"{path}: missing: {missing}")
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ExportError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(value, dict):
        raise ExportError(f"{path}: expected a JSON object")
    return value


def _model_new_path(run_dir: Path, best: dict) -> Optional[Path]:
    """The best's ModelNew module (best.py, else the recorded source when it is a .py), or None
    when the best is a native kernel."""
    recorded = Path(str(best.get("source", "")))
    for candidate in (run_dir / "best.py", recorded):
        if candidate.suffix == ".py" and candidate.is_file():
            return candidate
    return None


def _kernel_path(run_dir: Path, best: dict) -> Path:
    recorded = Path(str(best.get("source", "")))
    # The run directory may have moved since: its own best.* first.
    for candidate in (run_dir / "best.cu", run_dir / "best.cpp", recorded):
        if candidate.name and candidate.is_file():
            return candidate
    raise ExportError(f"{run_dir}: no best.cu or best.cpp (result.json names {recorded})")


def _problem(run_dir: Path, derived: dict):
    recorded = Path(str(derived.get("problem", "")))
    local = run_dir / recorded.name
    path = local if recorded.name and local.is_file() else recorded
    if not path.is_file():
        raise ExportError(f"{run_dir / 'reference.torch.json'}: problem file {recorded} is gone "
                          f"(and the run directory holds no copy)")
    data = path.read_bytes()
    expected = derived.get("problem_sha256")
    if expected and hashlib.sha256(data).hexdigest() != expected:
        raise ExportError(f"{path}: changed since the run (sha256 differs from the task's "
                          f"problem_sha256): the kernel was checked against the old module")
    return path, data.decode()


def _header(run_dir: Path, derived: dict, result: dict, best: dict, backend: str,
            problem_path: Path, kernel_path: Path) -> dict:
    final = result.get("final") or {}
    speedup = (final.get("speedup") or {}).get("speedup") if isinstance(final, dict) else None
    return {"task": str(derived.get("name", "")), "description": str(derived.get("description",
                                                                               "")),
            "family": str(derived.get("family", "")) or "none (written by the LLM generator)",
            "best": str(best.get("id", "")), "backend": backend, "run_dir": str(run_dir),
            "problem": str(problem_path), "problem_sha256": str(derived.get("problem_sha256", "")),
            "kernel": str(kernel_path),
            "speedup": f"{speedup:.3f}x" if isinstance(speedup, (int, float)) else "not timed"}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`solution RUN_DIR [-o FILE] [--include-dir DIR]...`: writes the solution (default
    RUN_DIR/solution.py) and prints its path; exit 1 with `kforge-torch: error: ...` on stderr
    when the run cannot give one, 2 on a bad command line."""
    parser = argparse.ArgumentParser(prog="python3 -m kforge_torch solution",
                                     description="write a run's KernelBench-format solution.py")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="where to write it (default RUN_DIR/solution.py)")
    parser.add_argument("--include-dir", type=Path, action="append", default=None,
                        help="kforge's include folders, in order (default: this checkout's "
                             "include/ and kernels/)")
    args = parser.parse_args(argv)
    try:
        written = write_solution(args.run_dir.resolve(),
                                 args.output or args.run_dir.resolve() / "solution.py",
                                 args.include_dir or default_include_dirs())
    except (ExportError, OSError) as e:
        sys.stderr.write(f"kforge-torch: error: {e}\n")
        return 1
    print(written)
    return 0
