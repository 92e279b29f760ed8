"""Test helpers: a minimal derived task (docs/torch_tasks.md, version 1) in a module's natural
signature, and instances of a module at several workloads.

The real derivation (derive.py) lives on another branch; this builds only the documented fields
match_family reads and rewrites, the way the contract describes them.
"""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import torch

FLOAT_NAMES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
               torch.bfloat16: "bf16", torch.int32: "i32", torch.int64: "i64",
               torch.bool: "bool"}  # bool has no kforge DType; match_family only skips it

Instance = Tuple[str, torch.nn.Module, list]


def build_instances(make: Callable[[dict], Tuple[torch.nn.Module, list]],
                    bindings: Sequence[dict]) -> List[Instance]:
    """One (workload name, model, inputs) per binding of sizes; `make(sizes)` builds the module
    and its forward arguments. Workloads are named gate_0, gate_1, ..."""
    instances = []
    for i, sizes in enumerate(bindings):
        torch.manual_seed(i)
        model, inputs = make(sizes)
        instances.append((f"gate_{i}", model, inputs))
    return instances


def _natural_entries(model: torch.nn.Module, inputs: list) -> List[Tuple[dict, dict, object]]:
    entries = []  # (signature tensor, torch.tensors entry, the tensor)
    for i, arg in enumerate(inputs):
        if isinstance(arg, torch.Tensor):
            entries.append(({"name": f"in{i}", "role": "input"}, {"source": "input", "index": i},
                            arg))
    for name, p in model.named_parameters():
        entries.append(({"name": name.replace(".", "_"), "role": "input"},
                        {"source": "parameter", "name": name}, p))
    for name, b in model.named_buffers():
        entries.append(({"name": name.replace(".", "_"), "role": "input"},
                        {"source": "buffer", "name": name}, b))
    with torch.no_grad():
        out = model(*inputs)
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    for i, o in enumerate(outs):
        entries.append(({"name": f"out{i}", "role": "output"}, {"source": "output", "index": i},
                        o))
    return entries


def make_derived(name: str, instances: Sequence[Instance]) -> dict:
    """A derived task for the module of `instances` in its natural signature: forward tensor
    inputs, parameters, buffers, outputs; one symbol per tensor dimension ("in0_d1")."""
    per_workload = {w: _natural_entries(m, inputs) for w, m, inputs in instances}
    first = next(iter(per_workload.values()))
    tensors = []
    for spec, _, t in first:
        symbols = [f"{spec['name']}_d{k}" for k in range(t.dim())]
        tensors.append(dict(spec, dtype=FLOAT_NAMES[t.dtype], shape=symbols))
    workloads, torch_workloads = [], {}
    for w, entries in per_workload.items():
        dims = {}
        for spec, (_, _, t) in zip(tensors, entries):
            dims.update({s: int(n) for s, n in zip(spec["shape"], t.shape)})
        workloads.append({"name": w, "dims": dims, "timed": False})
        torch_workloads[w] = {"constants": {}, "shapes": [list(t.shape) for _, _, t in entries]}
    return {
        "format": "kforge-torch-task", "version": 1, "name": name, "description": "",
        "problem": "", "problem_sha256": "", "family": "", "family_misses": {},
        "signature": {"tensors": tensors, "scalars": []},
        "workloads": workloads,
        "tolerance": {"rtol": 1e-4, "atol": 1e-6},
        "distributions": ["uniform", "normal", "heavy_tailed"],
        "flops": "", "bytes": "",
        "torch": {"tensors": [place for _, place, _ in first], "workloads": torch_workloads,
                  "double_reference": True},
        "input_rules": [{"tensor": t["name"], "rule": "generated", "why": "test"}
                        for t in tensors if t["role"] == "input"],
        "notes": [], "warnings": [],
    }
