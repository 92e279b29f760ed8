"""Decide by testing whether a PyTorch module computes what a built-in kernel family computes, and
rewrite the derived task (docs/torch_tasks.md) into that family's signature.

The families are data (family_table.py); the candidate mappings and their checks are in
family_search.py; the probes (the module run on random inputs and parameters) in family_probe.py.
"""

from __future__ import annotations

import copy
from typing import Dict, List, Sequence, Tuple

import torch

from .family_probe import ProbeSet
from .family_search import SEEDS, Match, Natural, adapter_text, binding_dims, natural_tensors, \
    probe_distributions, try_family
from .family_table import FAMILIES, Family
from .derive_tolerance import grow_for_reduction
from .conv_match import FORWARD, TRANSPOSED, match_conv_forward, match_conv_transpose
from .gemm_match import FAMILY as GEMM_FAMILY, match_gemm_epilogue


def match_family(derived: dict, instances: Sequence[Tuple[str, torch.nn.Module, list]]) -> dict:
    """The derived task rewritten into the first built-in family the module computes.

    `derived` is a derived task (JSON as a dict, version 1) in the module's natural signature:
    forward inputs, parameters/buffers, outputs, with `torch.tensors` and `torch.workloads[w]
    .shapes` for every workload. `instances` are (workload name, model, forward arguments) with the
    model built at that workload; 2 or more gate workloads, each named in `torch.workloads`.

    Returns a new dict (`derived` is not changed). On a match: `family`, `family_match` {family,
    adapter, checked}, `signature` (the family's tensor names, symbolic shapes and scalars),
    `workloads[*].dims` in the family's symbols, `torch.tensors` and `torch.workloads[*].shapes`
    in the family's tensor order (shapes stay the module's own: the family's are views of them),
    `flops`/`bytes`/`distributions` of the family's example task, `torch.scalars` (where each
    family scalar lives: scalar_place), and `input_rules` renamed. With
    no match `family` is "". Either way `family_misses` says why each family tried did not fit.
    The models' parameters and buffers are overwritten while testing and put back before return.

    Raises ValueError when `instances` is empty or disagrees with `derived` (an unknown workload,
    an input of another shape than `torch.workloads` says).
    """
    natural = natural_tensors(derived)
    shapes = {w: list(entry["shapes"]) for w, entry in derived["torch"]["workloads"].items()}
    _validate(natural, shapes, instances)
    obstacle = _obstacle(natural, instances)
    misses: Dict[str, str] = {}
    with ProbeSet(instances) as probes:
        for family in FAMILIES:
            outcome = obstacle or try_family(family, natural, shapes, instances, probes)
            if isinstance(outcome, Match):
                return _rewrite(derived, family, outcome, natural, shapes, len(instances), misses)
            misses[family.name] = outcome
        # The families whose computation each problem brings: read from the module's graph.
        for name, matcher in ((GEMM_FAMILY, match_gemm_epilogue),
                              (TRANSPOSED.family, match_conv_transpose),
                              (FORWARD.family, match_conv_forward)):
            outcome = obstacle or matcher(derived, natural, shapes, instances, probes, misses)
            if isinstance(outcome, dict):
                return outcome
            misses[name] = outcome
    result = copy.deepcopy(derived)
    result["family"] = ""
    result.pop("family_match", None)
    result["family_misses"] = misses
    return result


def _validate(natural: List[Natural], shapes, instances) -> None:
    if not instances:
        raise ValueError("match_family: no instances (the module built at gate workloads)")
    for workload, _, inputs in instances:
        if workload not in shapes:
            raise ValueError(f"match_family: instance workload {workload!r} is not in "
                             f"torch.workloads ({', '.join(shapes)})")
        for t in natural:
            kind, index = t.slot
            if kind == "input" and isinstance(inputs[index], torch.Tensor) and \
                    list(inputs[index].shape) != list(shapes[workload][t.index]):
                raise ValueError(f"match_family: input {index} of instance {workload!r} has shape "
                                 f"{list(inputs[index].shape)}, torch.workloads says "
                                 f"{shapes[workload][t.index]}")


def _obstacle(natural: List[Natural], instances) -> str:
    """Why no family can fit at all, or ""."""
    for i, arg in enumerate(instances[0][2]):
        if not isinstance(arg, torch.Tensor):
            return (f"forward argument {i} is a {type(arg).__name__}, not a tensor: the families "
                    f"take tensors only")
    outputs = sum(t.role == "output" for t in natural)
    if outputs != 1:
        return f"the module returns {outputs} outputs; every family writes one"
    return ""


def _rewrite(derived: dict, family: Family, match: Match, natural: List[Natural], shapes,
             instance_count: int, misses: Dict[str, str]) -> dict:
    result = copy.deepcopy(derived)
    binding = match.binding
    index = dict(binding.tensors)
    order = [index[t.name] for t in family.inputs + (family.output,)]
    primary = index[family.inputs[0].name]
    templates = family.inputs + (family.output,)
    result["family"] = family.name
    adapter = adapter_text(family, binding, natural, match.scalars)
    result["family_match"] = {
        "family": family.name, "adapter": adapter,
        "checked": (f"{instance_count} workloads x {len(SEEDS)} seeds x "
                    f"{len(probe_distributions(family))} "
                    f"distributions with random parameters, plus the built inputs "
                    f"({match.probes} runs), worst normalized error {match.worst_error:.2g}")}
    result["family_misses"] = misses
    result["signature"] = {
        "tensors": [{"name": t.name, "role": "output" if t is family.output else "input",
                     "dtype": natural[i].dtype, "shape": list(t.shape)}
                    for t, i in zip(templates, order)],
        "scalars": [{"name": s.name, "dtype": s.dtype, "value": match.scalars[s.name][0]}
                    for s in family.scalars]}
    for workload in result["workloads"]:
        workload["dims"] = binding_dims(family, binding.cuts, shapes[workload["name"]][primary])
    # forward's own scalar arguments keep the values the derivation saw: the family's scalars
    # (its signature now) are other numbers, found by testing.
    values = {v["name"]: v for v in derived["signature"].get("scalars", [])}
    result["torch"]["scalars"] = [
        {"source": e["source"], "index": e["index"], "value": values[e["name"]]["value"],
         "dtype": values[e["name"]]["dtype"]} if e.get("name") in values else e
        for e in derived["torch"].get("scalars", [])]
    result["torch"]["tensors"] = [derived["torch"]["tensors"][i] for i in order]
    # The family's own scalars: where the module keeps each (a solution reads it there).
    result["torch"]["scalars"] += [scalar_place(s.name, match.scalars[s.name][1])
                                   for s in family.scalars]
    for name, entry in result["torch"]["workloads"].items():
        entry["shapes"] = [shapes[name][i] for i in order]
    # Formulas in the module's own symbols would no longer bind; the family's use its symbols.
    result["flops"], result["bytes"] = family.flops, family.bytes
    result["distributions"] = list(family.distributions)
    tolerance = result.get("tolerance")
    if isinstance(tolerance, dict) and tolerance.get("rtol", 0.0) < family.min_rtol:
        tolerance["rtol"] = family.min_rtol
        result.setdefault("notes", []).append(
            f"rtol raised to {family.min_rtol:g}, examples/{family.name}'s: an honest fp32 "
            f"{family.name} misses 1e-4 on the gate's pareto inputs; the fp32 precision rule "
            f"stays the tight check")
    if family.reduction:
        grow_for_reduction(result, family.reduction)
    renamed = {natural[i].name: t.name for t, i in zip(templates, order)}
    result["input_rules"] = [dict(rule, tensor=renamed[rule["tensor"]])
                             for rule in derived.get("input_rules", [])
                             if rule.get("tensor") in renamed]
    notes = result.setdefault("notes", [])
    notes.append(f"family {family.name}: {adapter}")
    for t in natural:
        if t.index not in order:
            notes.append(f"{t.describe()} ({t.name}) is not in the {family.name} signature: the "
                         f"output does not depend on it (checked with random values); the "
                         f"reference keeps the module's own")
    return result


def scalar_place(name: str, origin: str) -> dict:
    """The `torch.scalars` entry of family scalar `name`, from the origin
    `family_probe.scalar_candidates` gave its value.

    "attribute ln.eps" -> {"source": "attribute", "name": name, "attribute": "ln.eps"} (a float
    attribute of the model or a submodule: a solution reads it, so a model built with another
    eps keeps it); any other origin (a literal in forward, the family's default, torch.finfo's
    eps) -> {"source": "constant", "name": name, "origin": origin}: the signature's value is the
    module's. The reference worker reads only "input" entries (forward's own scalars).
    """
    prefix = "attribute "
    if origin.startswith(prefix):
        return {"source": "attribute", "name": name, "attribute": origin[len(prefix):]}
    return {"source": "constant", "name": name, "origin": origin}


def family_names() -> List[str]:
    """The built-in families in the order they are tried."""
    return [f.name for f in FAMILIES] + [GEMM_FAMILY, CONV_FAMILY]
