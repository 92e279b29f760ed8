"""Probes for family matching: the module run on random inputs and random parameters.

A probe is one forward call of one instance (a module built at one gate workload) with every float
forward input, parameter and buffer overwritten by values of one distribution and seed. The values
each tensor held and the output are recorded by slot, so every candidate mapping of every family
is checked against the same run. `ProbeSet` runs each probe once, lazily, and puts the modules'
own parameters back when closed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch

# Slot of a module tensor: ("input", i), ("parameter", name), ("buffer", name) or ("output", i),
# as `torch.tensors` of the derived task names them.
Slot = Tuple[str, object]

# The gate's distributions (src/worker/input_generator.h), reproduced in torch: uniform [-1, 1),
# standard normal, sign * 10^u with u uniform in [-3, 3) (values of very different magnitudes),
# and uniform * 2^-10 (where an additive eps dominates a mean of squares). "built" is the
# instance's own inputs with the module's own parameters: the case the reference itself runs.
DISTRIBUTIONS = ("uniform", "normal", "heavy_tailed", "small")
BUILT = "built"

FLOAT_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
                torch.bfloat16: "bf16"}

# Per dtype of the module's output: the bound on ||a - b|| / ||b||, and the element-wise check
# |a - b| <= rtol * |b| + atol_rel * rms(b). Thresholds sit ~100x above what a correct module in
# that dtype reaches against the float64 family semantics, and below what a different function
# (tanh-form GELU, a misplaced eps) gives.
TOLERANCE = {"f32": (1e-5, 1e-4, 1e-5), "f64": (1e-10, 1e-8, 1e-10),
             "f16": (5e-3, 2e-2, 2e-3), "bf16": (3e-2, 1e-1, 1e-2)}


def random_values(like: torch.Tensor, distribution: str, gen: torch.Generator) -> torch.Tensor:
    """A new tensor of `like`'s shape, dtype and device with values of `distribution`.

    Values are drawn in float64 on the CPU and rounded once to `like.dtype`. Raises ValueError on
    an unknown distribution.
    """
    shape = tuple(like.shape)
    if distribution == "uniform":
        values = torch.rand(shape, generator=gen, dtype=torch.float64) * 2.0 - 1.0
    elif distribution == "normal":
        values = torch.randn(shape, generator=gen, dtype=torch.float64)
    elif distribution == "heavy_tailed":
        exponent = torch.rand(shape, generator=gen, dtype=torch.float64) * 6.0 - 3.0
        sign = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0).double()
        values = sign * torch.pow(10.0, exponent)
    elif distribution == "small":
        values = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2.0 - 1.0) * 2.0**-10
    else:
        raise ValueError(f"unknown distribution {distribution!r} (known: {DISTRIBUTIONS})")
    return values.to(dtype=like.dtype, device=like.device)


@dataclass
class Probe:
    """One forward run: the value of every float slot it saw, and its outputs (or why none)."""

    workload: str
    seed: int
    distribution: str
    tensors: Dict[Slot, torch.Tensor]
    outputs: List[torch.Tensor]
    error: str = ""

    def where(self) -> str:
        """"normal inputs, workload gate_small, seed 1", for messages."""
        return f"{self.distribution} inputs, workload {self.workload}, seed {self.seed}"


def _float_state(model: torch.nn.Module) -> Dict[Slot, torch.Tensor]:
    state: Dict[Slot, torch.Tensor] = {}
    for name, p in model.named_parameters():
        if p.dtype in FLOAT_DTYPES:
            state[("parameter", name)] = p
    for name, b in model.named_buffers():
        if b is not None and b.dtype in FLOAT_DTYPES:
            state[("buffer", name)] = b
    return state


def _as_outputs(result) -> List[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)) and all(isinstance(r, torch.Tensor) for r in result):
        return list(result)
    raise TypeError(f"forward returned a {type(result).__name__}, not a tensor or tuple of tensors")


class ProbeSet:
    """Lazily run and cached probes over `instances` [(workload_name, model, inputs)].

    The models' parameters and buffers are overwritten while probing; `close()` (or leaving the
    `with` block) copies their saved values back. Non-float forward arguments are passed as built.
    """

    def __init__(self, instances: Sequence[Tuple[str, torch.nn.Module, list]]):
        self.instances = list(instances)
        self._saved = [{slot: t.detach().clone() for slot, t in _float_state(m).items()}
                       for _, m, _ in self.instances]
        self._cache: Dict[Tuple[int, int, str], Probe] = {}

    def __enter__(self) -> "ProbeSet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Puts every model's own parameter and buffer values back."""
        with torch.no_grad():
            for (_, model, _), saved in zip(self.instances, self._saved):
                self._restore(model, saved)

    @staticmethod
    def _restore(model: torch.nn.Module, saved: Dict[Slot, torch.Tensor]) -> None:
        for slot, tensor in _float_state(model).items():
            tensor.copy_(saved[slot])

    def get(self, instance: int, seed: int, distribution: str) -> Probe:
        """The probe of instance index `instance` (cached). `distribution` is one of
        DISTRIBUTIONS, or BUILT for the instance's own inputs and parameters (seed ignored)."""
        key = (instance, seed if distribution != BUILT else 0, distribution)
        if key not in self._cache:
            self._cache[key] = self._run(instance, key[1], distribution)
        return self._cache[key]

    def _run(self, index: int, seed: int, distribution: str) -> Probe:
        workload, model, inputs = self.instances[index]
        # One generator per probe, seeded from its key, so a probe's values do not depend on
        # which probes ran before it.
        dist_index = (DISTRIBUTIONS + (BUILT,)).index(distribution)
        gen = torch.Generator().manual_seed(1_000_003 * seed + 1009 * index + dist_index)
        tensors: Dict[Slot, torch.Tensor] = {}
        args = []
        with torch.no_grad():
            self._restore(model, self._saved[index])
            for i, arg in enumerate(inputs):
                if isinstance(arg, torch.Tensor) and arg.dtype in FLOAT_DTYPES:
                    value = arg.detach().clone() if distribution == BUILT else \
                        random_values(arg, distribution, gen)
                    tensors[("input", i)] = value
                    arg = value.clone()  # the module may write into its argument
                args.append(arg)
            for slot, tensor in _float_state(model).items():
                if distribution != BUILT:
                    tensor.copy_(random_values(tensor, distribution, gen))
                tensors[slot] = tensor.detach().clone()
            probe = Probe(workload, seed, distribution, tensors, [])
            try:
                probe.outputs = [o.detach() for o in _as_outputs(model(*args))]
            except Exception as error:  # a module that cannot run these inputs does not match
                probe.error = f"forward raised {type(error).__name__}: {error}"
        for i, out in enumerate(probe.outputs):
            tensors[("output", i)] = out
        return probe


def compare(actual: torch.Tensor, expected: torch.Tensor, dtype: str) -> Tuple[float, str]:
    """Normalized error ||actual - expected|| / ||expected|| (float64, same numel) and "" when
    `actual` passes the checks of `dtype` (TOLERANCE), else why not.

    Non-finite values must sit at the same places with the same values on both sides; they are
    left out of the norms. Both tensors are flattened.
    """
    a = actual.detach().reshape(-1).to(device="cpu", dtype=torch.float64)
    b = expected.detach().reshape(-1).to(device="cpu", dtype=torch.float64)
    finite = torch.isfinite(b)
    # Mostly every value is finite on both sides: nothing to match by position or to leave
    # out, and the boolean-mask copies below (half of this function's time) are skipped.
    if not (bool(finite.all()) and bool(torch.isfinite(a).all())):
        if not torch.equal(torch.isfinite(a), finite) or not torch.equal(
                a[~finite].nan_to_num(0.0), b[~finite].nan_to_num(0.0)):
            return math.inf, "non-finite values where the family's are finite, or the reverse"
        a, b = a[finite], b[finite]
    diff = (a - b).abs()
    scale = float(torch.linalg.vector_norm(b))
    error = float(torch.linalg.vector_norm(diff)) / scale if scale > 0 else \
        float(torch.linalg.vector_norm(diff))
    bound, rtol, atol_rel = TOLERANCE[dtype]
    if error > bound:
        return error, f"normalized error {error:.3g} > {bound:g}"
    rms = scale / math.sqrt(max(b.numel(), 1))
    over = diff > rtol * b.abs() + atol_rel * rms
    if bool(over.any()):
        i = int(over.nonzero()[0])
        return error, (f"element {i}: {float(a[i]):.7g} vs {float(b[i]):.7g} "
                       f"(normalized error {error:.3g} alone would pass)")
    return error, ""


def scalar_candidates(model: torch.nn.Module, default: float,
                      dtype: Optional[torch.dtype]) -> List[Tuple[float, str]]:
    """Values a family scalar such as eps may take in `model`, each with where it came from.

    The float attributes of the model and its submodules (nn.LayerNorm.eps, a user's self.eps),
    the float literals in their forward code (`+ 1e-6`), the family's default, and torch.finfo's
    eps of `dtype` (F.rms_norm's default when eps is None). Finite, deduplicated, in that order.
    """
    found: List[Tuple[float, str]] = []
    for prefix, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, float):
                found.append((value, f"attribute {prefix + '.' if prefix else ''}{attr}"))
        code = getattr(type(module).forward, "__code__", None)
        for const in (code.co_consts if code is not None else ()):
            if isinstance(const, float):
                found.append((const, f"literal in {type(module).__name__}.forward"))
    found.append((default, "the family's default"))
    if dtype is not None and dtype.is_floating_point:
        found.append((float(torch.finfo(dtype).eps), f"torch.finfo({FLOAT_DTYPES[dtype]}).eps"))
    unique: Dict[float, Tuple[float, str]] = {}
    for value, origin in found:
        if math.isfinite(value) and value not in unique:
            unique[value] = (value, origin)
    return list(unique.values())
