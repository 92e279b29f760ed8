"""The built-in kernel families as data: one `Family` entry each, for `families.match_family`.

Each entry mirrors the family's example task (`examples/<family>/task.toml`: tensor names, symbolic
shapes, scalars and their defaults, flops/bytes formulas, gate distributions) and its
`reference.cpp` (what it computes, as a torch function on the family-form tensors). A test
(`python/tests/test_family_table.py`) checks the entries against the example tasks, so they cannot
drift apart. Adding a family is one entry in `FAMILIES` (plus its semantics, usually one line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import torch


@dataclass(frozen=True)
class TensorTemplate:
    """One tensor of a family's signature: its name and symbolic shape (e.g. ("rows", "cols"))."""

    name: str
    shape: Tuple[str, ...]


@dataclass(frozen=True)
class ScalarTemplate:
    """One scalar of a family's signature with the example task's value as the default."""

    name: str
    dtype: str
    default: float


# A semantics function takes the family-form inputs (float64, shapes as the template says, keyed by
# template name) and the scalars by name, and returns the family-form output (float64).
Semantics = Callable[[Dict[str, torch.Tensor], Dict[str, float]], torch.Tensor]


@dataclass(frozen=True)
class Family:
    """One built-in kernel family.

    `inputs[0]` is the primary input: its module tensor is split into len(inputs[0].shape) groups of
    consecutive dimensions, and those groups bind every symbol of the family (the other inputs and
    the output use only symbols the primary binds). `dtypes` are the element types some example
    task of the family uses (`examples/<family>` for f32, `examples/<family>_<dtype>` otherwise).
    """

    name: str
    summary: str
    inputs: Tuple[TensorTemplate, ...]
    output: TensorTemplate
    scalars: Tuple[ScalarTemplate, ...]
    semantics: Semantics
    dtypes: Tuple[str, ...]
    flops: str
    bytes: str
    distributions: Tuple[str, ...]
    # The example task's rtol where a derived task's f32 default (1e-4, derive_tolerance.py) is
    # tighter than what an honest fp32 kernel of the family meets on the gate's adversarial
    # inputs; 0 keeps the derived one. The fp32 precision rule stays the tight check.
    min_rtol: float = 0.0
    # The dims whose product is each output's reduction length, where inputs / outputs (what the
    # derivation grows a timed workload's atol by, derive_tolerance.tolerance_of) misses it:
    # attention's outputs each sum over s and d, yet its three inputs and one output have the same
    # size. () keeps the derived atol.
    reduction: Tuple[str, ...] = ()


def _rms_rows(t: Dict[str, torch.Tensor], s: Dict[str, float]) -> torch.Tensor:
    x = t["x"]
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + s["eps"]) * t["w"]


def _rms_channels(t: Dict[str, torch.Tensor], s: Dict[str, float]) -> torch.Tensor:
    x = t["x"]  # [n, c, s]: the mean runs over the middle dimension
    return x / torch.sqrt((x * x).mean(dim=1, keepdim=True) + s["eps"])


def _layernorm(t: Dict[str, torch.Tensor], s: Dict[str, float]) -> torch.Tensor:
    x = t["x"]
    centered = x - x.mean(dim=-1, keepdim=True)
    variance = (centered * centered).mean(dim=-1, keepdim=True)  # biased, as reference.cpp
    return centered / torch.sqrt(variance + s["eps"]) * t["w"] + t["b"]


def _gelu_erf(t: Dict[str, torch.Tensor], s: Dict[str, float]) -> torch.Tensor:
    x = t["x"]
    return 0.5 * x * (1.0 + torch.erf(x / 2.0**0.5))


def _silu(t: Dict[str, torch.Tensor], s: Dict[str, float]) -> torch.Tensor:
    x = t["x"]
    return x / (1.0 + torch.exp(-x))


def _attention(t: Dict[str, torch.Tensor], s: Dict[str, float]) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v over [b, s, d] (F.scaled_dot_product_attention's default: no
    mask, scale 1/sqrt(d) with d = q's last dim; Vaswani et al. 2017, eq. 1)."""
    q, k, v = t["q"], t["k"], t["v"]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


_ROWS_COLS = ("rows", "cols")
_GATE = ("uniform", "normal", "heavy_tailed")  # a task's default distributions
_NORM_GATE = ("uniform", "normal", "heavy_tailed", "small")  # "small" is where eps shows
# Not heavy_tailed for attention: a score of such values cancels terms of ~1e5 (examples/
# attention/task.toml says what honest fp32 then errs by).
_DOT_GATE = ("uniform", "normal")
_BSD = ("b", "s", "d")
_X = TensorTemplate("x", _ROWS_COLS)
_Y = TensorTemplate("y", _ROWS_COLS)


def _elementwise(name: str, summary: str, fn: Semantics, dtypes: Tuple[str, ...],
                 flops: str) -> Family:
    return Family(name, summary, (_X,), _Y, (), fn, dtypes, flops, "", _GATE)


# Order is priority: when several families fit one module (only element-wise ones on degenerate
# shapes could), the first wins.
FAMILIES: Tuple[Family, ...] = (
    Family("softmax", "softmax over the last dim of x [rows, cols]", (_X,), _Y, (),
           lambda t, s: torch.softmax(t["x"], dim=-1), ("f32", "f16"), "5*rows*cols", "", _GATE),
    Family("log_softmax", "log-softmax over the last dim of x [rows, cols]", (_X,), _Y, (),
           lambda t, s: torch.log_softmax(t["x"], dim=-1), ("f32", "bf16"), "5*rows*cols", "",
           _GATE),
    Family("rmsnorm", "x / sqrt(mean(x^2 over cols) + eps) * w, x [rows, cols], w [cols]",
           (_X, TensorTemplate("w", ("cols",))), _Y, (ScalarTemplate("eps", "f32", 1e-6),),
           _rms_rows, ("f32", "bf16"), "4*rows*cols", "", _NORM_GATE),
    Family("layernorm",
           "(x - mean) / sqrt(biased var + eps) * w + b over cols, x [rows, cols], w, b [cols]",
           (_X, TensorTemplate("w", ("cols",)), TensorTemplate("b", ("cols",))), _Y,
           (ScalarTemplate("eps", "f32", 1e-5),), _layernorm, ("f32", "bf16"), "7*rows*cols", "",
           ("uniform", "normal", "small")),
    Family("rmsnorm_channels", "x / sqrt(mean(x^2 over c) + eps), x [n, c, s], no weight",
           (TensorTemplate("x", ("n", "c", "s")),), TensorTemplate("y", ("n", "c", "s")),
           (ScalarTemplate("eps", "f32", 1e-5),), _rms_channels, ("f32",), "3*n*c*s", "",
           _NORM_GATE),
    Family("gemv", "y = A x, A [rows, cols], x [cols], y [rows]",
           (TensorTemplate("A", _ROWS_COLS), TensorTemplate("x", ("cols",))),
           TensorTemplate("y", ("rows",)), (), lambda t, s: t["A"] @ t["x"], ("f32",),
           "2*rows*cols", "", _GATE),
    Family("gemv_t", "y = A^T x, A [rows, cols], x [rows], y [cols]",
           (TensorTemplate("A", _ROWS_COLS), TensorTemplate("x", ("rows",))),
           TensorTemplate("y", ("cols",)), (), lambda t, s: t["A"].t() @ t["x"], ("f32",),
           "2*rows*cols", "", _GATE),
    Family("attention", "softmax(q k^T / sqrt(d)) v, q, k, v [b, s, d] (self-attention, no mask)",
           (TensorTemplate("q", _BSD), TensorTemplate("k", _BSD), TensorTemplate("v", _BSD)),
           TensorTemplate("o", _BSD), (), _attention, ("f32",), "4*b*s*s*d + 5*b*s*s", "",
           _DOT_GATE, min_rtol=1e-3, reduction=("d",)),
    _elementwise("relu", "max(x, 0) element-wise", lambda t, s: torch.relu(t["x"]), ("f32",),
                 "rows*cols"),
    _elementwise("gelu", "GELU, erf form, element-wise", _gelu_erf, ("f32", "bf16"),
                 "20*rows*cols"),
    _elementwise("silu", "x / (1 + exp(-x)) element-wise", _silu, ("f32", "f16"),
                 "10*rows*cols"),
)


def family_by_name(name: str) -> Family:
    """The entry of `FAMILIES` called `name`; KeyError naming the known ones otherwise."""
    for family in FAMILIES:
        if family.name == name:
            return family
    raise KeyError(f"unknown family {name!r} (known: {', '.join(f.name for f in FAMILIES)})")
