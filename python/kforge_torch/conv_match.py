"""Serving a PyTorch problem that is one convolution, optionally followed by element-wise ops,
with a convolution family:
- nn.Conv1d/2d/3d (any groups, stride, padding, dilation) with grouped_conv
  (kernels/<backend>/grouped_conv),
- nn.ConvTranspose1d/2d/3d (also output_padding) with grouped_conv_transpose
  (kernels/<backend>/grouped_conv_transpose),
both described by kernels/common/conv_args.h; the ops become the task's epilogue chain
(kernels/common/epilogue.h), per-channel parameters (KernelBench L2/1's `x + self.bias` of shape
[C, 1, 1]) as its channel tensors.

As for gemm_epilogue (gemm_match.py), a fixed family entry cannot describe it: the geometry is the
module's and the chain is read from its `torch.fx` graph (a hypothesis: forward is the
convolution of its input, then the chain), and the match is decided by testing: the chain of
F.conv3d / F.conv_transpose3d with that geometry, in float64, against the module run on random
inputs and parameters (family_probe.ProbeSet), on every probe. The families' tensors are 3-D: a
2-D module's [N, C, H, W] is viewed as [N, C, 1, H, W] (and its weight and output the same way),
a 1-D module's with two such dimensions; the geometry becomes the family's ten integer scalars,
the missing dimensions' stride 1, padding 0, dilation 1.
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
from .epilogue_chain import Chain, apply_chain, trace_chain
from .gemm_match import GATE_DISTRIBUTIONS, channel_slot, finish_rewrite

GEOMETRY = ("stride_d", "stride_h", "stride_w", "padding_d", "padding_h", "padding_w",
            "dilation_d", "dilation_h", "dilation_w", "groups")  # kernels/common/conv_args.h


@dataclass(frozen=True)
class ConvKind:
    """A convolution family: its name, the modules it serves (rank 1, 2, 3), how messages name
    them, its weight's symbols ([in, out per group, taps] transposed, [out, in per group, taps]
    forward), and its FLOPs formula."""

    family: str
    modules: Tuple[type, type, type]
    what: str
    weight: Tuple[str, ...]
    flops: str
    transposed: bool


TRANSPOSED = ConvKind("grouped_conv_transpose",
                      (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d,
                       torch.nn.ConvTranspose3d), "nn.ConvTranspose1d/2d/3d",
                      ("c", "cog", "kd", "kh", "kw"), "2*n*c*d*h*w*cog*kd*kh*kw", True)
FORWARD = ConvKind("grouped_conv", (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d),
                   "nn.Conv1d/2d/3d", ("co", "cig", "kd", "kh", "kw"),
                   "2*n*co*od*oh*ow*cig*kd*kh*kw", False)


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
    kind: ConvKind = TRANSPOSED


def _padded(values: Sequence[int], rank: int, fill: int) -> List[int]:
    return [fill] * (3 - rank) + [int(v) for v in values]


def trace_conv(model: torch.nn.Module, kind: ConvKind = TRANSPOSED) -> Union[Conv, str]:
    """The Conv of `model`, or why its forward is not one convolution of `kind` on its input
    followed by element-wise ops of kernels/common/epilogue.h."""
    chain = trace_chain(model, kind.modules, kind.what)
    if isinstance(chain, str):
        return chain
    module = dict(model.named_modules())[chain.anchor]
    padding = module.padding
    if padding == "valid":
        padding = (0,) * (module.weight.dim() - 2)
    if module.padding_mode != "zeros" or isinstance(padding, str):
        return f"padding mode {module.padding_mode!r} / padding {module.padding!r}: the family " \
               f"pads with zeros by explicit amounts"
    rank = kind.modules.index(type(module)) + 1
    geometry = _padded(module.stride, rank, 1) + _padded(padding, rank, 0) + \
        _padded(module.dilation, rank, 1) + [int(module.groups)]
    if any(name in GEOMETRY for name in list(chain.scalars) + list(chain.tensors)):
        return "a scalar or tensor of the chain takes a geometry scalar's name"
    return Conv(chain.anchor, rank, geometry, module.bias is not None,
                _padded(getattr(module, "output_padding", ()), rank, 0), chain, kind)


def extents(conv: Conv) -> Dict[str, dict]:
    """torch.extents of the derived task: the output's od, oh, ow from the input and kernel
    extents (no tensor a solution is given holds them), and for a transposed convolution
    co = groups * cog. Transposed (PyTorch's ConvTranspose3d shape formula):
    (in - 1) * stride - 2 * padding + dilation * (k - 1) + 1 + output_padding, written as
    const + stride * in + dilation * k. Forward (Conv3d's):
    floor((in + 2 * padding - dilation * (k - 1) - 1) / stride) + 1
    = floor((in - dilation * k + 2 * padding + dilation - 1 + stride) / stride)."""
    rules = {}
    if conv.kind.transposed:
        rules["co"] = {"const": 0, "terms": [[conv.geometry[9], "cog"]]}  # groups * cog
    for i, (out, size, k) in enumerate((("od", "d", "kd"), ("oh", "h", "kh"), ("ow", "w", "kw"))):
        stride, pad, dil = conv.geometry[i], conv.geometry[3 + i], conv.geometry[6 + i]
        if conv.kind.transposed:
            rules[out] = {"const": 1 + conv.output_padding[i] - stride - 2 * pad - dil,
                          "terms": [[stride, size], [dil, k]]}
        else:
            rules[out] = {"const": 2 * pad + dil - 1 + stride, "terms": [[1, size], [-dil, k]],
                          "div": stride}
    return rules


def semantics(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], geometry: List[int],
              output_shape: Sequence[int], ops: Sequence[str] = (),
              scalars: Optional[Dict[str, float]] = None,
              tensors: Optional[Dict[str, torch.Tensor]] = None,
              kind: ConvKind = TRANSPOSED) -> torch.Tensor:
    """The family's meaning in float64: the chain `ops` (scalars by name, channel tensors [co]
    by name) of the convolution of x [n, c, d, h, w] by w plus b [co] (or None), geometry in
    GEOMETRY order. Transposed: w [c, cog, kd, kh, kw], the output's spatial size as given
    (output_padding is what makes it up to the formula's); forward: w [co, cig, kd, kh, kw]."""
    stride, padding, dilation = geometry[0:3], geometry[3:6], geometry[6:9]
    groups = geometry[9] or x.shape[1] // w.shape[1]  # 0 (forward only): c / cig
    bias = None if b is None else b.double()
    if kind.transposed:
        base = [(x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] *
                (w.shape[2 + i] - 1) + 1 for i in range(3)]
        extra = [int(output_shape[2 + i]) - base[i] for i in range(3)]
        v = F.conv_transpose3d(x.double(), w.double(), bias, stride=stride, padding=padding,
                               output_padding=extra, groups=groups, dilation=dilation)
    else:
        v = F.conv3d(x.double(), w.double(), bias, stride=stride, padding=padding,
                     dilation=dilation, groups=groups)
    channel = {name: t.reshape(1, -1, 1, 1, 1) for name, t in (tensors or {}).items()}
    return apply_chain(v, ops, scalars or {}, channel)


def _as_3d(t: torch.Tensor, rank: int) -> torch.Tensor:
    """[a, b, *spatial] viewed with 3 spatial dims (leading ones added)."""
    return t.reshape(list(t.shape[:2]) + [1] * (3 - rank) + list(t.shape[2:]))


def match_conv_transpose(derived: dict, natural: List[Natural], shapes,
                         instances: Sequence[Tuple[str, torch.nn.Module, list]],
                         probes: ProbeSet, misses: Dict[str, str]) -> Union[dict, str]:
    """The derived task rewritten into grouped_conv_transpose (a new dict), or why it does not
    fit; match_conv's arguments."""
    return match_conv(derived, natural, shapes, instances, probes, misses, TRANSPOSED)


def match_conv_forward(derived: dict, natural: List[Natural], shapes,
                       instances: Sequence[Tuple[str, torch.nn.Module, list]],
                       probes: ProbeSet, misses: Dict[str, str]) -> Union[dict, str]:
    """The derived task rewritten into grouped_conv (a new dict), or why it does not fit;
    match_conv's arguments."""
    return match_conv(derived, natural, shapes, instances, probes, misses, FORWARD)


def match_conv(derived: dict, natural: List[Natural], shapes,
               instances: Sequence[Tuple[str, torch.nn.Module, list]],
               probes: ProbeSet, misses: Dict[str, str], kind: ConvKind) -> Union[dict, str]:
    """The derived task rewritten into `kind`'s family (a new dict), or why it does not fit.

    Arguments as gemm_match.match_gemm_epilogue's. The result has signature x [n, c, d, h, w],
    weight (kind.weight), bias [co] when the module has one, the chain's channel tensors [co],
    y [n, co, od, oh, ow], the ten geometry scalars, then the chain's; dims per workload (the
    module's shapes, with unit dimensions for a 1-D or 2-D module); torch.tensors /
    torch.workloads in that order; flops; torch.extents.
    """
    conv = trace_conv(instances[0][1], kind)
    if isinstance(conv, str):
        return conv
    for workload, model, _ in instances[1:]:
        other = trace_conv(model, kind)
        if isinstance(other, str) or other.geometry[:9] != conv.geometry[:9] or \
                other.chain.scalars != conv.chain.scalars:
            return f"the geometry or the chain's scalars differ at workload {workload!r}: the " \
                   f"family's scalars are one per task"
        if other.geometry[9] != conv.geometry[9]:
            # A depthwise convolution's groups follow its channel count, which the workloads
            # vary: groups 0 tells the kernels to take it from the shapes (c / cig;
            # kernels/common/conv_args.h). Not for a transposed one: its output channels
            # (groups * cog) would then be a product, which no extent rule gives a solution.
            if kind.transposed:
                return f"the groups differ at workload {workload!r} ({conv.geometry[9]}, then " \
                       f"{other.geometry[9]}): a transposed family's groups are one per task"
            conv.geometry[9] = 0
    slots = [("input", 0), ("parameter", conv.name + ".weight")]
    if conv.has_bias:
        slots.append(("parameter", conv.name + ".bias"))
    by_slot = {t.slot: t for t in natural}
    slots += [channel_slot(by_slot, dotted) for dotted in conv.chain.tensors.values()]
    outputs = [t for t in natural if t.role == "output"]
    if any(s not in by_slot for s in slots) or len(outputs) != 1:
        return "the convolution's input, weight, bias or a channel tensor is not a tensor of " \
               "the derived signature"
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
    functional = "F.conv_transpose3d" if kind.transposed else "F.conv3d"
    for key in keys:
        probe = probes.get(*key)
        if probe.error:
            return f"{probe.error} ({probe.where()})"
        x = _as_3d(probe.tensors[order[0].slot], conv.rank)
        w = _as_3d(probe.tensors[order[1].slot], conv.rank)
        b = probe.tensors[order[2].slot] if conv.has_bias else None
        tensors = {name: probe.tensors[channel_slot(by_slot, dotted)]
                   for name, dotted in conv.chain.tensors.items()}
        out = _as_3d(probe.tensors[outputs[0].slot], conv.rank)
        try:
            expected = semantics(x, w, b, conv.geometry, out.shape, conv.chain.ops, values,
                                 tensors, kind)
        except RuntimeError as error:
            return f"{functional} with the module's geometry fails: {error} ({probe.where()})"
        error, why = compare(out.reshape(expected.shape), expected, outputs[0].dtype)
        worst = max(worst, error)
        if why:
            return f"the convolution and chain {conv.chain.ops} read from the graph " \
                   f"differ: {why} ({probe.where()})"
    return _rewrite(derived, conv, order, shapes, len(keys), worst, misses)


def _rewrite(derived, conv: Conv, order: List[Natural], shapes, probes: int, worst: float,
             misses) -> dict:
    result = copy.deepcopy(derived)
    kind = conv.kind
    tensors = list(conv.chain.tensors)
    names = ["x", "weight"] + (["bias"] if conv.has_bias else []) + tensors + ["y"]
    symbolic = [["n", "c", "d", "h", "w"], list(kind.weight)] + \
        ([["co"]] if conv.has_bias else []) + [["co"]] * len(tensors) + \
        [["n", "co", "od", "oh", "ow"]]
    geometry = ", ".join(f"{n} {v}" for n, v in zip(GEOMETRY, conv.geometry))
    view = f"; {conv.rank}-D viewed as 3-D (leading unit dimensions)" if conv.rank < 3 else ""
    adapter = "; ".join(f"{n} <- {t.describe()}" for n, t in zip(names, order)) + \
        f"{view}; {geometry} (module {conv.name}, fixed at construction); epilogue " + \
        (", ".join(conv.chain.ops) or "none")
    for name, (value, origin) in conv.chain.scalars.items():
        adapter += f"; {name} = {value:g} ({origin})"
    functional = "F.conv_transpose3d" if kind.transposed else "F.conv3d"
    result["family"] = kind.family
    result["family_match"] = {
        "family": kind.family, "adapter": adapter,
        "checked": (f"{probes} runs with random inputs and parameters against "
                    f"{functional} in float64 with the geometry read from the module, then "
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
        workload["dims"].update(zip(kind.weight, w5))
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
    # Products per output: cig x taps forward; at most c x taps transposed (a stride skips some,
    # the groups divide it: fixed per task, so the ratio between workloads is what counts).
    reduction = ["c", "kd", "kh", "kw"] if kind.transposed else ["cig", "kd", "kh", "kw"]
    return finish_rewrite(result, derived, order, names, shapes, kind.flops, kind.family,
                          adapter, reduction)
