"""Serving a PyTorch problem that is one transposed convolution (nn.ConvTranspose1d/2d/3d, any
groups, stride, padding, output_padding, dilation), optionally followed by element-wise ops,
with the grouped_conv_transpose family (kernels/<backend>/grouped_conv_transpose,
kernels/common/conv_args.h; the ops as the task's epilogue chain, kernels/common/epilogue.h).

As for gemm_epilogue (gemm_match.py), a fixed family entry cannot describe it: the geometry is the
module's and the chain is read from its `torch.fx` graph (a hypothesis: forward is the
convolution of its input, then the chain), and the match is decided by testing: the chain of
F.conv_transpose3d with that geometry, in float64, against the module run on random inputs and
parameters (family_probe.ProbeSet), on every probe. The family's tensors are 3-D: a 2-D module's [N, C, H, W] is viewed as [N, C, 1, H, W]
(and its weight and output the same way), a 1-D module's with two such dimensions; the geometry
becomes the family's ten integer scalars, the missing dimensions' stride 1, padding 0,
dilation 1.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.fx
import torch.nn.functional as F

from .family_probe import DISTRIBUTIONS, ProbeSet, compare
from .family_search import Natural, probe_keys
from .gemm_match import GATE_DISTRIBUTIONS, Chain, apply_chain, finish_rewrite, trace_chain

FAMILY = "grouped_conv_transpose"
GEOMETRY = ("stride_d", "stride_h", "stride_w", "padding_d", "padding_h", "padding_w",
            "dilation_d", "dilation_h", "dilation_w", "groups")  # kernels/common/conv_args.h
_CONVS = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


@dataclass
class Conv:
    """What the graph says: the submodule's name, its spatial rank (1..3), the geometry as the
    family's scalars (GEOMETRY order, 3-D), and the element-wise chain after it."""

    name: str
    rank: int
    geometry: List[int]
    has_bias: bool
    output_padding: List[int]
    chain: Chain


def _padded(values: Sequence[int], rank: int, fill: int) -> List[int]:
    return [fill] * (3 - rank) + [int(v) for v in values]


def trace_conv(model: torch.nn.Module) -> Union[Conv, str]:
    """The Conv of `model`, or why its forward is not one ConvTranspose on its input followed by
    element-wise ops of kernels/common/epilogue.h."""
    chain = trace_chain(model, _CONVS, "nn.ConvTranspose1d/2d/3d")
    if isinstance(chain, str):
        return chain
    module = dict(model.named_modules())[chain.anchor]
    if module.padding_mode != "zeros" or isinstance(module.padding, str):
        return f"padding mode {module.padding_mode!r} / padding {module.padding!r}: the family " \
               f"pads with zeros by explicit amounts"
    rank = {torch.nn.ConvTranspose1d: 1, torch.nn.ConvTranspose2d: 2,
            torch.nn.ConvTranspose3d: 3}[type(module)]
    geometry = _padded(module.stride, rank, 1) + _padded(module.padding, rank, 0) + \
        _padded(module.dilation, rank, 1) + [int(module.groups)]
    if any(name in GEOMETRY for name in chain.scalars):
        return "a scalar of the chain takes a geometry scalar's name"
    return Conv(chain.anchor, rank, geometry, module.bias is not None,
                _padded(module.output_padding, rank, 0), chain)


def extents(conv: Conv) -> Dict[str, dict]:
    """torch.extents of the derived task: co = groups * cog; od, oh, ow from the input and
    kernel extents, as
    (in - 1) * stride - 2 * padding + dilation * (k - 1) + 1 + output_padding (PyTorch's
    ConvTranspose3d shape formula) written as const + stride * in + dilation * k. A solution sizes
    its output with them (no tensor it is given holds them)."""
    rules = {"co": {"const": 0, "terms": [[conv.geometry[9], "cog"]]}}  # groups * cog
    for i, (out, size, k) in enumerate((("od", "d", "kd"), ("oh", "h", "kh"), ("ow", "w", "kw"))):
        stride, pad, dil = conv.geometry[i], conv.geometry[3 + i], conv.geometry[6 + i]
        rules[out] = {"const": 1 + conv.output_padding[i] - stride - 2 * pad - dil,
                      "terms": [[stride, size], [dil, k]]}
    return rules


def semantics(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], geometry: List[int],
              output_shape: Sequence[int], ops: Sequence[str] = (),
              scalars: Optional[Dict[str, float]] = None) -> torch.Tensor:
    """The family's meaning in float64: the chain `ops` (scalars by name) of the transposed
    convolution of x [n, c, d, h, w] by w [c, cog, kd, kh, kw] plus b [co] (or None), geometry in
    GEOMETRY order; the output's spatial size as given (output_padding is what makes it up to
    the formula's)."""
    stride, padding, dilation = geometry[0:3], geometry[3:6], geometry[6:9]
    base = [(x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] *
            (w.shape[2 + i] - 1) + 1 for i in range(3)]
    extra = [int(output_shape[2 + i]) - base[i] for i in range(3)]
    v = F.conv_transpose3d(x.double(), w.double(), None if b is None else b.double(),
                           stride=stride, padding=padding, output_padding=extra,
                           groups=geometry[9], dilation=dilation)
    return apply_chain(v, ops, scalars or {})


def _as_3d(t: torch.Tensor, rank: int) -> torch.Tensor:
    """[a, b, *spatial] viewed with 3 spatial dims (leading ones added)."""
    return t.reshape(list(t.shape[:2]) + [1] * (3 - rank) + list(t.shape[2:]))


def match_conv_transpose(derived: dict, natural: List[Natural], shapes,
                         instances: Sequence[Tuple[str, torch.nn.Module, list]],
                         probes: ProbeSet, misses: Dict[str, str]) -> Union[dict, str]:
    """The derived task rewritten into grouped_conv_transpose (a new dict), or why it does not fit.

    Arguments as gemm_match.match_gemm_epilogue's. The result has signature x [n, c, d, h, w],
    weight [c, cog, kd, kh, kw], bias [co] when the module has one, y [n, co, od, oh, ow], the ten
    geometry scalars; dims per workload (the module's shapes, with unit dimensions for a 1-D or
    2-D module); torch.tensors / torch.workloads in that order; flops.
    """
    conv = trace_conv(instances[0][1])
    if isinstance(conv, str):
        return conv
    for workload, model, _ in instances[1:]:
        other = trace_conv(model)
        if isinstance(other, str) or other.geometry != conv.geometry or \
                other.chain.scalars != conv.chain.scalars:
            return f"the geometry or the chain's scalars differ at workload {workload!r}: the " \
                   f"family's scalars are one per task"
    slots = [("input", 0), ("parameter", conv.name + ".weight")]
    if conv.has_bias:
        slots.append(("parameter", conv.name + ".bias"))
    by_slot = {t.slot: t for t in natural}
    outputs = [t for t in natural if t.role == "output"]
    if any(s not in by_slot for s in slots) or len(outputs) != 1:
        return "the ConvTranspose's input, weight or bias is not a tensor of the derived signature"
    order = [by_slot[s] for s in slots] + outputs
    if any(t.dtype != "f32" for t in order):
        return "the family is fp32; the module's tensors are " + \
            ", ".join(f"{t.name} {t.dtype}" for t in order)
    for name, entry in shapes.items():
        if len(entry[order[0].index]) != 2 + conv.rank:
            return f"the input at workload {name!r} is not batched ([N, C, *spatial])"
    values = {name: value for name, (value, _) in conv.chain.scalars.items()}
    # Probed on the task's own gate distributions: on heavy-tailed inputs the module's fp32 sums
    # cancel and miss an element-wise bound that float64 sets (see GATE_DISTRIBUTIONS).
    keys = probe_keys(len(instances), [d for d in DISTRIBUTIONS if d in GATE_DISTRIBUTIONS])
    worst = 0.0
    for key in keys:
        probe = probes.get(*key)
        if probe.error:
            return f"{probe.error} ({probe.where()})"
        x = _as_3d(probe.tensors[order[0].slot], conv.rank)
        w = _as_3d(probe.tensors[order[1].slot], conv.rank)
        b = probe.tensors[order[2].slot] if conv.has_bias else None
        out = _as_3d(probe.tensors[outputs[0].slot], conv.rank)
        try:
            expected = semantics(x, w, b, conv.geometry, out.shape, conv.chain.ops, values)
        except RuntimeError as error:
            return f"F.conv_transpose3d with the module's geometry fails: {error} " \
                   f"({probe.where()})"
        error, why = compare(out.reshape(expected.shape), expected, outputs[0].dtype)
        worst = max(worst, error)
        if why:
            return f"the transposed convolution and chain {conv.chain.ops} read from the graph " \
                   f"differ: {why} ({probe.where()})"
    return _rewrite(derived, conv, order, shapes, len(keys), worst, misses)


def _rewrite(derived, conv: Conv, order: List[Natural], shapes, probes: int, worst: float,
             misses) -> dict:
    result = copy.deepcopy(derived)
    names = ["x", "weight"] + (["bias"] if conv.has_bias else []) + ["y"]
    symbolic = [["n", "c", "d", "h", "w"], ["c", "cog", "kd", "kh", "kw"]] + \
        ([["co"]] if conv.has_bias else []) + [["n", "co", "od", "oh", "ow"]]
    geometry = ", ".join(f"{n} {v}" for n, v in zip(GEOMETRY, conv.geometry))
    view = f"; {conv.rank}-D viewed as 3-D (leading unit dimensions)" if conv.rank < 3 else ""
    adapter = "; ".join(f"{n} <- {t.describe()}" for n, t in zip(names, order)) + \
        f"{view}; {geometry} (module {conv.name}, fixed at construction); epilogue " + \
        (", ".join(conv.chain.ops) or "none")
    for name, (value, origin) in conv.chain.scalars.items():
        adapter += f"; {name} = {value:g} ({origin})"
    result["family"] = FAMILY
    result["family_match"] = {
        "family": FAMILY, "adapter": adapter,
        "checked": (f"{probes} runs with random inputs and parameters against "
                    f"F.conv_transpose3d in float64 with the geometry read from the module, then "
                    f"the chain, worst normalized error {worst:.2g}")}
    result["family_misses"] = misses
    result["signature"] = {
        "tensors": [{"name": n, "role": "output" if n == "y" else "input", "dtype": t.dtype,
                     "shape": s} for n, t, s in zip(names, order, symbolic)],
        "scalars": [{"name": n, "dtype": "i64", "value": v}
                    for n, v in zip(GEOMETRY, conv.geometry)] +
                   [{"name": n, "dtype": "f32", "value": v}
                    for n, (v, _) in conv.chain.scalars.items()]}
    result["epilogue"] = list(conv.chain.ops)
    for workload in result["workloads"]:
        module_shapes = shapes[workload["name"]]
        pad = [1] * (3 - conv.rank)
        x_shape = list(module_shapes[order[0].index])
        w_shape = list(module_shapes[order[1].index])
        y_shape = list(module_shapes[order[-1].index])
        x5, w5, y5 = (s[:2] + pad + s[2:] for s in (x_shape, w_shape, y_shape))
        workload["dims"] = dict(zip(["n", "c", "d", "h", "w"], x5))
        workload["dims"].update(zip(["cog", "kd", "kh", "kw"], w5[1:]))
        workload["dims"].update(zip(["co", "od", "oh", "ow"], y5[1:]))
    values = {v["name"]: v for v in derived["signature"].get("scalars", [])}
    result["torch"]["scalars"] = [
        {"source": e["source"], "index": e["index"], "value": values[e["name"]]["value"],
         "dtype": values[e["name"]]["dtype"]} if e.get("name") in values else e
        for e in derived["torch"].get("scalars", [])]
    from .families import scalar_place  # families imports this module
    result["torch"]["scalars"] += [
        scalar_place(n, f"module {conv.name}'s geometry") for n in GEOMETRY]
    result["torch"]["scalars"] += [scalar_place(n, origin)
                                   for n, (_, origin) in conv.chain.scalars.items()]
    result["torch"]["extents"] = extents(conv)
    return finish_rewrite(result, derived, order, names, shapes, "2*n*c*d*h*w*cog*kd*kh*kw",
                          FAMILY, adapter)
