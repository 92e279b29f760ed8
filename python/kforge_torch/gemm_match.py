"""Serving a PyTorch problem of the form "Linear, then element-wise ops" with the gemm_epilogue
family (kernels/<backend>/gemm_epilogue, kernels/common/epilogue.h): Y = chain(X W^T + b).

A fixed family entry (family_table.py) cannot describe this family: its computation is the chain,
which differs from problem to problem (KernelBench level 2: Gemm_ReLU_Divide,
Gemm_Multiply_LeakyReLU, Matmul_Scaling_ResidualAdd, ...). So the chain is read from the
module's `torch.fx` graph (a hypothesis), and the match is decided as for the fixed families: the
family's semantics, in float64, against the module run on random inputs and parameters
(family_probe.ProbeSet), on every probe. A graph kforge cannot read, or a chain whose semantics
disagree with the module anywhere, is no match, with the reason.
"""

from __future__ import annotations

import copy
import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch

from .derive_tolerance import grow_for_reduction
from .epilogue_chain import Chain, apply_chain, trace_chain
from .family_probe import DISTRIBUTIONS, ProbeSet, compare
from .family_search import Natural, probe_keys

FAMILY = "gemm_epilogue"
# The gate's distributions for a derived task: uniform and normal. Not heavy_tailed: its values
# span 1e-3..1e3, so a dot product of them cancels terms of ~1e5 down to results of ~10, and an
# honest fp32 order then misses the element-wise bound (rtol x |result|) that the derived
# tolerance sets, as src/core/task.h says of "dot products that cancel".
GATE_DISTRIBUTIONS = ["uniform", "normal"]


def semantics(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], ops: Sequence[str],
              scalars: Dict[str, float],
              tensors: Optional[Dict[str, torch.Tensor]] = None) -> torch.Tensor:
    """chain(x w^T + b) in float64 (x [M, K], w [N, K], b [N] or None, channel tensors [N] by
    name), the family's meaning."""
    v = x.double() @ w.double().t()
    if b is not None:
        v = v + b.double()
    return apply_chain(v, ops, scalars, tensors)


def channel_slot(by_slot: dict, dotted: str) -> Tuple[str, str]:
    """The natural-signature slot of a channel tensor's module attribute: a parameter's, else a
    buffer's."""
    return ("parameter", dotted) if ("parameter", dotted) in by_slot else ("buffer", dotted)


def match_gemm_epilogue(derived: dict, natural: List[Natural], shapes,
                        instances: Sequence[Tuple[str, torch.nn.Module, list]],
                        probes: ProbeSet, misses: Dict[str, str]) -> Union[dict, str]:
    """The derived task rewritten into gemm_epilogue (a new dict), or why it does not fit.

    Arguments as families.match_family's internals: the natural tensors, every workload's
    module shapes, the instances and their probes, and the other families' misses (kept in the
    result). The result has what a fixed family's rewrite has (signature x [M, K], weight [N, K],
    bias [N] when the Linear has one, y [M, N]; dims M, K, N per workload; torch.tensors and
    torch.workloads in that order; torch.scalars; flops) plus `epilogue`, the chain.
    """
    chain = trace_chain(instances[0][1])
    if isinstance(chain, str):
        return chain
    linear = dict(instances[0][1].named_modules())[chain.anchor]
    slots = [("input", 0), ("parameter", chain.anchor + ".weight")]
    if linear.bias is not None:
        slots.append(("parameter", chain.anchor + ".bias"))
    by_slot = {t.slot: t for t in natural}
    slots += [channel_slot(by_slot, dotted) for dotted in chain.tensors.values()]
    outputs = [t for t in natural if t.role == "output"]
    if any(s not in by_slot for s in slots) or len(outputs) != 1:
        return "the Linear's input, weight, bias or a channel tensor is not a tensor of the " \
               "derived signature"
    order = [by_slot[s] for s in slots] + outputs
    if any(t.dtype != "f32" for t in order):
        return "the family is fp32; the module's tensors are " + \
            ", ".join(f"{t.name} {t.dtype}" for t in order)
    extra = [t for t in natural if t.role == "input" and t not in order and t.slot[0] == "input"]
    if extra:
        return f"forward input {extra[0].describe()} is not the Linear's"
    values = {name: value for name, (value, _) in chain.scalars.items()}
    keys = probe_keys(len(instances), DISTRIBUTIONS)
    worst = 0.0
    for key in keys:
        probe = probes.get(*key)
        if probe.error:
            return f"{probe.error} ({probe.where()})"
        x = probe.tensors[order[0].slot]
        w = probe.tensors[order[1].slot]
        b = probe.tensors[order[2].slot] if linear.bias is not None else None
        out = probe.tensors[outputs[0].slot]
        k = x.shape[-1]
        tensors = {name: probe.tensors[channel_slot(by_slot, dotted)].reshape(-1)
                   for name, dotted in chain.tensors.items()}
        expected = semantics(x.reshape(-1, k), w, b, chain.ops, values, tensors)
        error, why = compare(out.reshape(expected.shape), expected, outputs[0].dtype)
        worst = max(worst, error)
        if why:
            return f"the chain {chain.ops} read from the graph differs: {why} ({probe.where()})"
    return _rewrite(derived, chain, order, linear.bias is not None, shapes, len(keys), worst,
                    misses)


def _rewrite(derived, chain: Chain, order: List[Natural], has_bias: bool, shapes, probes: int,
             worst: float, misses) -> dict:
    result = copy.deepcopy(derived)
    names = ["x", "weight"] + (["bias"] if has_bias else []) + list(chain.tensors) + ["y"]
    symbolic = [["M", "K"], ["N", "K"]] + ([["N"]] if has_bias else []) + \
        [["N"]] * len(chain.tensors) + [["M", "N"]]
    adapter = "; ".join(f"{n} <- {t.describe()}" for n, t in zip(names, order)) + \
        "; M = prod(shape[:-1]), K = shape[-1] of x's shape, N = weight.shape[0]; epilogue " + \
        (", ".join(chain.ops) or "none")
    for name, (value, origin) in chain.scalars.items():
        adapter += f"; {name} = {value:g} ({origin})"
    result["family"] = FAMILY
    result["family_match"] = {
        "family": FAMILY, "adapter": adapter,
        "checked": (f"{probes} runs with random inputs and parameters against chain(x W^T + b) "
                    f"in float64 (the chain read from the fx graph), worst normalized error "
                    f"{worst:.2g}")}
    result["family_misses"] = misses
    result["epilogue"] = list(chain.ops)
    result["signature"] = {
        "tensors": [{"name": n, "role": "output" if n == "y" else "input", "dtype": t.dtype,
                     "shape": s} for n, t, s in zip(names, order, symbolic)],
        "scalars": [{"name": n, "dtype": "f32", "value": v}
                    for n, (v, _) in chain.scalars.items()]}
    for workload in result["workloads"]:
        module_shapes = shapes[workload["name"]]
        x_shape, w_shape = module_shapes[order[0].index], module_shapes[order[1].index]
        workload["dims"] = {"M": math.prod(x_shape[:-1]), "K": x_shape[-1], "N": w_shape[0]}
    values = {v["name"]: v for v in derived["signature"].get("scalars", [])}
    result["torch"]["scalars"] = [
        {"source": e["source"], "index": e["index"], "value": values[e["name"]]["value"],
         "dtype": values[e["name"]]["dtype"]} if e.get("name") in values else e
        for e in derived["torch"].get("scalars", [])]
    from .families import scalar_place  # families imports this module
    result["torch"]["scalars"] += [scalar_place(n, origin)
                                   for n, (_, origin) in chain.scalars.items()]
    return finish_rewrite(result, derived, order, names, shapes, "2*M*N*K", FAMILY, adapter,
                          reduction=["K"])


def finish_rewrite(result: dict, derived: dict, order: List[Natural], names: List[str], shapes,
                   flops: str, family: str, adapter: str,
                   reduction: Sequence[str] = ()) -> dict:
    """The part of a graph-read family's rewrite that is the same for every such family:
    torch.tensors and each workload's module shapes in signature order (`order`, the natural
    tensors named `names`), flops, the gate distributions, input_rules renamed, the note.
    Returns `result`, changed."""
    result["torch"]["tensors"] = [derived["torch"]["tensors"][t.index] for t in order]
    for name, entry in result["torch"]["workloads"].items():
        entry["shapes"] = [shapes[name][t.index] for t in order]
    result["flops"], result["bytes"] = flops, ""
    result["distributions"] = list(GATE_DISTRIBUTIONS)
    renamed = {t.name: n for n, t in zip(names, order)}
    result["input_rules"] = [dict(rule, tensor=renamed[rule["tensor"]])
                             for rule in derived.get("input_rules", [])
                             if rule.get("tensor") in renamed]
    result.setdefault("notes", []).append(f"family {family}: {adapter}")
    if reduction:
        grow_for_reduction(result, reduction)
    return result
