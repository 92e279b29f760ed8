"""Shared by the solution tests: run directories for python/kforge_torch/solution.py, and
KernelBench's static checker loaded from ../shared/kernelbench when it is there."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import pathlib
import shutil
from typing import Optional

from kforge_torch.derive import derive
from kforge_torch.families import match_family

PROBLEMS = pathlib.Path(__file__).resolve().parent / "problems"
ROOT = PROBLEMS.parents[2]
CHECKER = ROOT.parent / "shared" / "kernelbench" / "harness" / "kernelbench" / \
    "kernel_static_checker.py"


def fake_run(folder: pathlib.Path, problem: str, backend: str = "cpu", variant: str = "",
             defines: Optional[dict] = None) -> pathlib.Path:
    """A finished run directory of `problem` (a file of python/tests/problems) as kforge
    optimize writes it, whose best kernel is `variant` (default the family's first source) of
    the matched family on `backend`: derived task, run.json, result.json, best.* and the problem
    copy. No search runs: the files are what solution.py reads."""
    path = PROBLEMS / problem
    derived = derive(str(path), match_family=match_family)
    family = derived["family"]
    sources = sorted((ROOT / "kernels" / backend / family).glob("*.c*"))
    source = next(s for s in sources if not variant or s.stem == variant)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, folder / path.name)
    best = folder / ("best" + source.suffix)
    header = "".join(f"#define {k} {v}\n" for k, v in (defines or {}).items())
    best.write_text(f"// kforge candidate {source.stem} (family {family}, backend {backend})\n"
                    + header + source.read_text())
    (folder / "reference.torch.json").write_text(json.dumps(derived))
    (folder / "run.json").write_text(json.dumps({"backend": backend, "task": derived["name"]}))
    (folder / "result.json").write_text(json.dumps({
        "best": {"id": source.stem, "source": str(best)},
        "final": {"speedup": {"speedup": 1.5}}}))
    return folder


def static_checker():
    """KernelBench's kernel_static_checker module, loaded from its file alone (the package's
    __init__ imports what Debian's Python may lack), or None when ../shared is not here."""
    if not CHECKER.is_file():
        return None
    spec = importlib.util.spec_from_file_location("kernelbench_static_checker", CHECKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
