"""The ModelNew shell of a task's Triton candidates (issue 19; `python3 -m kforge_torch
model-new-shell --derived FILE [-o FILE]`): a KernelBench-format module for the derived task's
problem whose forward calls `kforge_run(inputs, outputs, scalars)` of a kernel module not yet
written in. The templates generator (`kforge optimize PROBLEM.py --language triton`) asks for it
once per run and writes one candidate per parameter point of a Triton family
(kernels/triton/<family>/) by replacing the marker line (solution_template.KERNEL_MODULE_MARKER)
with the variant's module. The rest is the solution machinery of solution.py: the problem's
code and Model's constructor copied (solution_problem.py), the forward plan (solution_plan.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from .solution_plan import make_plan
from .solution_problem import problem_parts
from .solution_template import KERNEL_MODULE_MARKER, render_python_kernel_shell


class ShellError(ValueError):
    """A derived task that cannot give a shell; the message names the file and why."""


def shell_text(derived: dict, derived_path: Path, problem: Optional[Path] = None) -> str:
    """The shell of `derived` (a derived task, as reference.torch.json holds it) for the problem
    file `problem` (default: the task's `problem`); ShellError when the task has no family, the
    problem file is gone or changed (its sha256 differs from the task's), or the plan cannot be
    made."""
    if not derived.get("family"):
        raise ShellError(f"{derived_path}: the task has no built-in family (the Triton families "
                         f"serve a matched family's signature)")
    path = problem or Path(str(derived.get("problem", "")))
    if not path.is_file():
        raise ShellError(f"{derived_path}: problem file {path} is gone")
    data = path.read_bytes()
    expected = derived.get("problem_sha256")
    if expected and hashlib.sha256(data).hexdigest() != expected:
        raise ShellError(f"{path}: changed since the task was derived (sha256 differs from the "
                         f"task's problem_sha256)")
    try:
        plan = make_plan(derived)
        parts = problem_parts(data.decode(), str(path))
    except ValueError as e:
        raise ShellError(f"{derived_path}: {e}") from None
    header = {"task": str(derived.get("name", "")),
              "description": str(derived.get("description", "")),
              "family": str(derived.get("family", "")), "problem": str(path),
              "problem_sha256": str(expected or hashlib.sha256(data).hexdigest())}
    text = render_python_kernel_shell(header, parts, plan)
    assert text.count(KERNEL_MODULE_MARKER) == 1
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`model-new-shell --derived FILE [--problem FILE] [-o FILE]`: prints (or writes) the shell;
    exit 1 with `kforge-torch: error: ...` on stderr when the task cannot give one, 2 on a bad
    command line."""
    parser = argparse.ArgumentParser(prog="python3 -m kforge_torch model-new-shell",
                                     description="the ModelNew shell of a task's Triton "
                                                 "candidates")
    parser.add_argument("--derived", type=Path, required=True,
                        help="the derived task (JSON, as `kforge task FILE --json` prints it)")
    parser.add_argument("--problem", type=Path, default=None,
                        help="the problem file (default: the task's `problem`)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="write it there")
    args = parser.parse_args(argv)
    try:
        derived = json.loads(args.derived.read_text())
        if not isinstance(derived, dict):
            raise ShellError(f"{args.derived}: expected a JSON object")
        text = shell_text(derived, args.derived, args.problem)
    except (ShellError, OSError, json.JSONDecodeError) as e:
        sys.stderr.write(f"kforge-torch: error: {e}\n")
        return 1
    if args.output is None:
        sys.stdout.write(text)
        return 0
    temporary = args.output.with_name(f".{args.output.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, args.output)
    return 0
