"""The candidate search behind `families.match_family`: mappings of a module's tensors onto a
family's inputs, and the checks that decide them.

Every mapping of the module's float tensors onto the family's inputs that fits by element counts
at every workload is a candidate. The family's first input (the primary) is split into as many
groups of consecutive dimensions as it has symbols (x [2, 3, 4] as rows = prod(shape[:2]) = 6,
cols = shape[2] = 4); those groups bind every symbol. Only such views of row-major data are
possible, never transposes, so the worker can reshape without a copy. Each candidate (with each
value a scalar such as eps may take in the module) is screened on two probes, then checked on
all: every instance x 2 seeds x the family's distributions (probe_distributions), plus the built
inputs, with random parameters (family_probe.py). A family matches when one candidate passes every probe.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Dict, Iterator, List, Sequence, Tuple, Union

import torch

from .family_probe import BUILT, DISTRIBUTIONS, FLOAT_DTYPES, Probe, ProbeSet, Slot, compare, \
    scalar_candidates
from .family_table import Family

SEEDS = (0, 1)
# Cheap first look at each candidate: normal inputs, and small ones where an additive eps shows.
SCREEN = ((0, 0, "normal"), (0, 0, "small"))
FLOAT_NAMES = set(FLOAT_DTYPES.values())


@dataclass(frozen=True)
class Natural:
    """Tensor `index` of the derived (natural) signature and the module slot it lives in."""

    index: int
    name: str
    role: str
    dtype: str
    slot: Slot

    def describe(self) -> str:
        kind, key = self.slot
        return f"{kind} {key!r}" if isinstance(key, str) else f"{kind} {key}"


@dataclass(frozen=True)
class Binding:
    """One candidate: family tensor name -> natural index (inputs, then the output), and the cut
    points that split the primary's dimensions into one group per primary symbol."""

    tensors: Tuple[Tuple[str, int], ...]
    cuts: Tuple[int, ...]
    rank: int


@dataclass
class Match:
    """A candidate that passed every probe: its scalars (name -> (value, where it came from)), the
    worst normalized error over the `probes` probes it passed."""

    binding: Binding
    scalars: Dict[str, Tuple[float, str]]
    worst_error: float
    probes: int


def natural_tensors(derived: dict) -> List[Natural]:
    """The derived task's signature tensors with their module slots (`torch.tensors`); ValueError
    when the two lists differ in length."""
    tensors = derived["signature"]["tensors"]
    places = derived["torch"]["tensors"]
    if len(tensors) != len(places):
        raise ValueError(f"derived task: signature has {len(tensors)} tensors, torch.tensors "
                         f"{len(places)}")
    result = []
    for i, (spec, place) in enumerate(zip(tensors, places)):
        key = place["name"] if place["source"] in ("parameter", "buffer") else place["index"]
        result.append(Natural(i, spec["name"], spec["role"], spec["dtype"], (place["source"], key)))
    return result


def probe_distributions(family: Family) -> Tuple[str, ...]:
    """The distributions a candidate mapping is checked on: those of the family's gate, plus
    "small" (where an additive eps shows). A family whose gate leaves heavy_tailed out does so
    because an honest fp32 computation of it misses the bounds there (attention: scores that
    cancel), so a correct fp32 module would miss them too."""
    return tuple(d for d in DISTRIBUTIONS if d in family.distributions or d == "small")


def probe_keys(instance_count: int, distributions: Sequence[str]) -> List[Tuple[int, int, str]]:
    """The ProbeSet keys a match is decided on: every instance x SEEDS x `distributions`, then
    each instance's own built inputs (BUILT)."""
    return [(i, seed, d) for i in range(instance_count) for seed in SEEDS
            for d in distributions] + [(i, 0, BUILT) for i in range(instance_count)]


def _groups(cuts: Sequence[int], rank: int) -> List[Tuple[int, int]]:
    bounds = [0, *cuts, rank]
    return list(zip(bounds[:-1], bounds[1:]))


def _cut_choices(rank: int, groups: int) -> List[Tuple[int, ...]]:
    """Cut points splitting `rank` dims into `groups` consecutive groups. Non-empty groups first,
    then later cuts first, so an element-wise family sees [prod(leading), last dim] first."""
    cuts = itertools.combinations_with_replacement(range(rank + 1), groups - 1)
    return sorted(cuts, key=lambda c: (sum(a == b for a, b in _groups(c, rank)),
                                       [-x for x in c]))


def binding_dims(family: Family, cuts: Sequence[int], shape: Sequence[int]) -> Dict[str, int]:
    """Each symbol of the primary bound to the product of its group of `shape`."""
    return {symbol: math.prod(shape[a:b])
            for symbol, (a, b) in zip(family.inputs[0].shape, _groups(cuts, len(shape)))}


def _group_text(a: int, b: int) -> str:
    return "1" if a == b else f"shape[{a}]" if b == a + 1 else f"prod(shape[{a}:{b}])"


def _bindings(family: Family, natural: List[Natural],
              shapes: Dict[str, List[List[int]]]) -> Iterator[Binding]:
    """Every candidate mapping that fits by element counts at every workload in `shapes`
    (workload -> the module's shape of each natural tensor), each distinct view once."""
    inputs = [t for t in natural if t.role == "input" and t.dtype in FLOAT_NAMES]
    forward = {t.index for t in natural if t.role == "input" and t.slot[0] == "input"}
    outputs = [t for t in natural if t.role == "output"]
    templates = family.inputs[1:] + (family.output,)
    seen = set()
    for primary in inputs:
        if primary.dtype not in family.dtypes:
            continue
        ranks = {len(s[primary.index]) for s in shapes.values()}
        if len(ranks) != 1:
            continue
        primary_shape = next(iter(shapes.values()))[primary.index]
        for cuts in _cut_choices(len(primary_shape), len(family.inputs[0].shape)):
            dims = {w: binding_dims(family, cuts, s[primary.index]) for w, s in shapes.items()}
            options = []
            for template in templates:
                pool = outputs if template is family.output else inputs
                options.append([t.index for t in pool if t is not primary and all(
                    math.prod(shapes[w][t.index]) == math.prod(d[s] for s in template.shape)
                    for w, d in dims.items())])
            for chosen in itertools.product(*options):
                used = {primary.index, *chosen}
                if len(used) != len(chosen) + 1 or not forward <= used:
                    continue  # a tensor used twice, or a forward input the family cannot feed
                key = (primary.index, chosen, tuple(tuple(d.items()) for d in dims.values()))
                if key not in seen:
                    seen.add(key)
                    names = [t.name for t in family.inputs[:1] + templates]
                    yield Binding(tuple(zip(names, (primary.index, *chosen))), tuple(cuts),
                                  len(primary_shape))


def _check(family: Family, binding: Binding, natural: List[Natural], probe: Probe,
           scalars: Dict[str, float]) -> Tuple[float, str]:
    """Error of `binding` on one probe and "" when it passes, else why not."""
    if probe.error:
        return math.inf, probe.error
    index = dict(binding.tensors)
    primary = probe.tensors[natural[index[family.inputs[0].name]].slot]
    dims = binding_dims(family, binding.cuts, list(primary.shape))
    views = {}
    for template in family.inputs + (family.output,):
        tensor = probe.tensors.get(natural[index[template.name]].slot)
        shape = [dims[s] for s in template.shape]
        if tensor is None or tensor.numel() != math.prod(shape):
            return math.inf, f"{template.name} does not fit {shape} at workload {probe.workload}"
        views[template.name] = tensor.reshape(shape)
    actual = views.pop(family.output.name)
    inputs = {name: t.to(device="cpu", dtype=torch.float64) for name, t in views.items()}
    expected = family.semantics(inputs, scalars)
    return compare(actual, expected, natural[index[family.output.name]].dtype)


def _worst(family, binding, natural, probes: ProbeSet, keys, scalars) -> Tuple[float, str]:
    worst = 0.0
    for key in keys:
        probe = probes.get(*key)  # run lazily: most candidates fail on the first probes
        error, why = _check(family, binding, natural, probe, scalars)
        worst = max(worst, error)
        if why:
            return worst, f"{why} ({probe.where()})"
    return worst, ""


def _scalar_choices(family: Family, instances, natural, binding) -> List[Dict[str, Tuple]]:
    primary = natural[dict(binding.tensors)[family.inputs[0].name]]
    dtype = next((d for d, n in FLOAT_DTYPES.items() if n == primary.dtype), None)
    per_scalar = [[(s.name, c) for c in scalar_candidates(instances[0][1], s.default, dtype)]
                  for s in family.scalars]
    return [dict(combo) for combo in itertools.product(*per_scalar)]


def try_family(family: Family, natural: List[Natural], shapes, instances,
               probes: ProbeSet) -> Union[Match, str]:
    """A Match, or why `family` does not fit (the closest candidate's failure).

    `shapes` maps every workload name to the module's shape of each natural tensor; `instances`
    are the caller's [(workload, model, inputs)], `probes` their ProbeSet.
    """
    bindings = list(_bindings(family, natural, shapes))
    if not bindings:
        return _no_binding_reason(family, natural, shapes)
    full = probe_keys(len(instances), probe_distributions(family))
    closest = (math.inf, "", None)
    for binding in bindings:
        tried = []
        for choice in _scalar_choices(family, instances, natural, binding):
            values = {name: value for name, (value, _) in choice.items()}
            error, why = _worst(family, binding, natural, probes, SCREEN, values)
            tried.append((error, why, choice))
        tried.sort(key=lambda t: t[0])
        for error, why, choice in tried:
            values = {name: value for name, (value, _) in choice.items()}
            if not why:
                error, why = _worst(family, binding, natural, probes, full, values)
                if not why:
                    return Match(binding, choice, error, len(full))
            if error < closest[0] or closest[2] is None:
                closest = (error, why, binding)
    return (f"closest of {len(bindings)} candidate mapping(s), "
            f"{adapter_text(family, closest[2], natural, {})}, differs: {closest[1]}")


def _no_binding_reason(family: Family, natural: List[Natural], shapes) -> str:
    first = next(iter(shapes.values()))
    have = ", ".join(f"{t.describe()} {t.dtype} {first[t.index]}" for t in natural)
    wanted = ", ".join(f"{t.name} {list(t.shape)}" for t in family.inputs)
    usable = [t for t in natural if t.role == "input" and t.dtype in family.dtypes]
    forward = [t for t in natural if t.role == "input" and t.slot[0] == "input"]
    # The common cases in words first; the full picture after.
    if len(usable) < len(family.inputs):
        return (f"the family takes {len(family.inputs)} input(s) ({wanted}) of "
                f"{'/'.join(family.dtypes)}; the module has {len(usable)} such tensor(s) "
                f"({have})")
    if len(forward) > len(family.inputs):
        return (f"forward takes {len(forward)} tensors; the family takes {len(family.inputs)} "
                f"({wanted})")
    return (f"no mapping of the module's tensors ({have}) onto {wanted} -> {family.output.name} "
            f"{list(family.output.shape)} ({'/'.join(family.dtypes)}) fits by dtype and element "
            f"counts at every workload with every forward input used")


def adapter_text(family: Family, binding: Binding, natural: List[Natural],
                 scalars: Dict[str, Tuple[float, str]]) -> str:
    """Human-readable mapping: "x <- input 0; y <- output 0; rows = shape[0], cols = shape[1] of
    x's shape; eps = 1e-05 (attribute eps)"."""
    index = dict(binding.tensors)
    parts = []
    for template in family.inputs + (family.output,):
        t = natural[index[template.name]]
        parts.append(f"{template.name} <- {t.describe()}")
    groups = ", ".join(f"{s} = {_group_text(a, b)}" for s, (a, b) in zip(
        family.inputs[0].shape, _groups(binding.cuts, binding.rank)))
    text = f"{'; '.join(parts)}; {groups} of {family.inputs[0].name}'s shape"
    for name, (value, origin) in scalars.items():
        text += f"; {name} = {value:g} ({origin})"
    return text
