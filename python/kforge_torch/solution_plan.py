"""How a solution's forward maps the module's tensors onto kforge_run's signature (solution.py).

From a derived task (docs/torch_tasks.md) this works out, once, at export time:

- every symbol of the signature (rows, cols, n, c, s, ...) as an *extent rule* over the forward
  arguments (then the module's parameters and buffers): the product of dims [first, end) of one
  of them, found by testing the rule on the module shapes of every workload in
  `torch.workloads` (KernelBench 40's cols is prod(shape[1:4]) of x);
- every dim of every output's module shape the same way (gemv's y is (M, 1) in the module: M is
  dim 0 of A, 1 a constant);
- where each signature tensor comes from (forward argument, parameter or buffer by its
  named_parameters() name, output) and each scalar (forward argument, a module attribute such as
  eps, or the constant the derivation found).

The rules hold on the workloads the derivation ran; the solution checks at run time that each
tensor has the element count its signature shape asks for and raises naming it otherwise.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

# An extent rule: a constant, or (tensor, first dim, end dim): the product of that tensor's dims
# [first, end), the tensor a forward argument (its position) or a parameter or buffer of the
# module (its dotted name: a conv's out_channels is only in its weight's shape), or
# ("linear", const, ((coef, symbol), ...), div): floor((const + sum of coef x the symbol's
# extent) / div), for sizes no tensor holds (a convolution's output height; the task's
# torch.extents).
Extent = Union[int, Tuple[Union[int, str], int, int],
               Tuple[str, int, Tuple[Tuple[int, str], ...], int]]
Holder = Union[int, str]

DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
          "i32": "int32", "i64": "int64", "bool": "bool"}


@dataclass(frozen=True)
class PlannedTensor:
    """One signature tensor in kforge_run's order.

    `source` is "input" (key = forward argument), "parameter" / "buffer" (key = dotted name) or
    "output" (key = position in what forward returns); `shape` the signature shape, symbols as
    str and fixed extents as int; `dtype` a torch dtype name ("float32"); `as_is`: the kernel
    honours strides (`strided` in the task) and the module shape is the signature's, so the
    tensor is handed over without .contiguous().
    """

    name: str
    role: str
    source: str
    key: Union[int, str]
    dtype: str
    shape: Tuple[Union[str, int], ...]
    as_is: bool


@dataclass(frozen=True)
class PlannedScalar:
    """One signature scalar: `source` "input" (key = forward argument), "attribute" (key =
    dotted attribute of the module) or "constant" (key = None); `value` the derivation's."""

    name: str
    source: str
    key: Union[int, str, None]
    value: float


@dataclass(frozen=True)
class Plan:
    """Everything a solution's forward needs; see the module docstring.

    `ranks`: forward argument -> rank of that tensor argument at every workload (the rules index
    its dims); `symbols`: (symbol, rule) in signature order; `output_shapes`: output position ->
    one rule per dim of its module shape.
    """

    tensors: Tuple[PlannedTensor, ...]
    scalars: Tuple[PlannedScalar, ...]
    ranks: Tuple[Tuple[int, int], ...]
    symbols: Tuple[Tuple[str, Extent], ...]
    output_shapes: Tuple[Tuple[int, Tuple[Extent, ...]], ...]


def make_plan(derived: dict) -> Plan:
    """The Plan of a derived task (a dict, the JSON of docs/torch_tasks.md).

    Raises ValueError naming the field when the task lacks what a solution needs: a `torch`
    table with one entry per signature tensor, module shapes at every workload, a symbol or an
    output dim that no rule over the forward arguments gives at every workload.
    """
    torch_table = _field(derived, "torch", dict, "derived task")
    places = _field(torch_table, "tensors", list, "torch")
    tensors = _field(_field(derived, "signature", dict, "derived task"), "tensors", list,
                     "signature")
    if len(places) != len(tensors):
        raise ValueError(f"torch.tensors has {len(places)} entries, the signature "
                         f"{len(tensors)} tensors")
    workloads = _field(derived, "workloads", list, "derived task")
    shapes = _module_shapes(torch_table, workloads, len(tensors))
    arguments = _argument_shapes(places, tensors, shapes)
    primary = next((p["index"] for p in places if p["source"] == "input"), None)
    grouped = _primary_groups(tensors, places, arguments, workloads)
    computed = _computed(torch_table, workloads)
    symbols = []
    for symbol in _symbols(tensors):
        if symbol in computed:
            continue
        values = {w["name"]: int(w["dims"][symbol]) for w in workloads}
        rule = grouped.get(symbol) or find_extent(values, arguments, primary,
                                                  f"signature symbol {symbol!r}")
        symbols.append((symbol, rule))
    # Computed symbols last: their rules read the others.
    symbols += [(symbol, rule) for symbol, (rule, _) in computed.items()]
    planned, outputs = [], []
    for i, (spec, place) in enumerate(zip(tensors, places)):
        planned.append(_planned_tensor(spec, place, shapes, i))
        if place["source"] == "output":
            dims = []
            rank = {len(s[i]) for s in shapes.values()}
            if len(rank) != 1:
                raise ValueError(f"output {place['index']} has ranks {sorted(rank)} across the "
                                 f"workloads; a solution needs one")
            for d in range(rank.pop()):
                values = {w: s[i][d] for w, s in shapes.items()}
                rule = next((rule for rule, given in computed.values() if given == values), None)
                dims.append(rule or find_extent(values, arguments, primary,
                                                f"dim {d} of output {place['index']}",
                                                same_dim=d))
            outputs.append((int(place["index"]), tuple(dims)))
    ranks = tuple(sorted((arg, len(next(iter(by_workload.values()))))
                         for arg, by_workload in arguments.items() if isinstance(arg, int)))
    return Plan(tuple(planned), _scalars(derived, torch_table), ranks, tuple(symbols),
                tuple(sorted(outputs)))


def find_extent(values: Dict[str, int], arguments: Dict[Holder, Dict[str, List[int]]],
                preferred: Optional[int], what: str, same_dim: Optional[int] = None) -> Extent:
    """A rule giving `values` (workload -> extent) at every workload: the product of one group
    of consecutive dims of a tensor (`arguments`: forward argument position or parameter /
    buffer name -> workload -> module shape; arguments before parameters): dim `same_dim` of
    the `preferred` argument first (an output shaped like its input
    keeps each dim where it is, even where two dims are equal), then the `preferred` argument,
    single dims before longer groups; else the constant when every workload has the same
    extent. ValueError naming `what` when neither fits."""
    if preferred in arguments and same_dim is not None:
        by_workload = arguments[preferred]
        if all(len(by_workload[w]) > same_dim and by_workload[w][same_dim] == v
               for w, v in values.items() if w in by_workload):
            return (preferred, same_dim, same_dim + 1)
    order = sorted(arguments, key=lambda a: (a != preferred, isinstance(a, str), str(a)))
    for length in range(1, 1 + max((len(next(iter(s.values()))) for s in arguments.values()),
                                   default=0)):
        for arg in order:
            by_workload = arguments[arg]
            rank = len(next(iter(by_workload.values())))
            for first in range(rank - length + 1):
                if all(w in by_workload and
                       math.prod(by_workload[w][first:first + length]) == v
                       for w, v in values.items()):
                    return (arg, first, first + length)
    distinct = set(values.values())
    if len(distinct) == 1:
        return distinct.pop()
    raise ValueError(f"{what}: no group of the dims of a forward argument, parameter or buffer "
                     f"gives its extents {values} at every workload, and they differ (a solution "
                     f"reads every extent off the tensors it is given, or computes it by a rule "
                     f"of the task's torch.extents, which has none for it)")


def _computed(torch_table: dict, workloads: Sequence[dict]) -> Dict[str, Tuple[Extent, dict]]:
    """torch.extents as symbol -> (its rule, workload -> extent); ValueError naming the
    symbol when a rule is malformed or does not give a workload's value (the task loader checks
    the same: src/task/torch_extents.h)."""
    computed = {}
    table = torch_table.get("extents", {})
    if not isinstance(table, dict):
        raise ValueError("torch.extents: expected a table of symbol = {const, terms}")
    for symbol, entry in table.items():
        try:
            terms = tuple((int(coef), str(name)) for coef, name in entry["terms"])
            div = int(entry.get("div", 1))
            if div < 1:
                raise ValueError(f"div {div} < 1")
            rule = ("linear", int(entry["const"]), terms, div)
            values = {w["name"]: (rule[1] + sum(c * int(w["dims"][n]) for c, n in terms)) // div
                      for w in workloads}
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"torch.extents.{symbol}: expected {{const, terms: [[coef, "
                             f"symbol], ...], div (optional, >= 1)}} over the workloads' "
                             f"symbols ({error})") from None
        for w in workloads:
            if values[w["name"]] != int(w["dims"][symbol]):
                raise ValueError(f"torch.extents.{symbol}: gives {values[w['name']]} at workload "
                                 f"{w['name']!r}, which binds {w['dims'][symbol]}")
        computed[symbol] = (rule, values)
    return computed


def _field(table: dict, key: str, kind: type, where: str):
    if not isinstance(table, dict) or key not in table:
        raise ValueError(f"{where}: missing {key!r}")
    value = table[key]
    if not isinstance(value, kind):
        raise ValueError(f"{where}.{key}: expected a {kind.__name__}, got "
                         f"{type(value).__name__}")
    return value


def _module_shapes(torch_table: dict, workloads: Sequence[dict],
                   count: int) -> Dict[str, List[List[int]]]:
    by_name = _field(torch_table, "workloads", dict, "torch")
    shapes = {}
    for w in workloads:
        entry = by_name.get(w["name"])
        if not isinstance(entry, dict) or len(entry.get("shapes", [])) != count:
            raise ValueError(f"torch.workloads.{w['name']}.shapes: expected the module's shape "
                             f"of each of the {count} signature tensors")
        shapes[w["name"]] = [[int(d) for d in s] for s in entry["shapes"]]
    return shapes


def _argument_shapes(places: Sequence[dict], tensors: Sequence[dict],
                     shapes: Dict[str, List[List[int]]]) -> Dict[Holder, Dict[str, List[int]]]:
    """Forward tensor argument (position) or parameter / buffer (name) -> workload -> its module
    shape (tensors whose rank changes between workloads are left out: no rule can index them)."""
    arguments: Dict[Holder, Dict[str, List[int]]] = {}
    for i, place in enumerate(places):
        if place["source"] == "output":
            continue
        key: Holder = int(place["index"]) if place["source"] == "input" \
            else place.get("name", tensors[i]["name"])
        by_workload = {w: s[i] for w, s in shapes.items()}
        if len({len(s) for s in by_workload.values()}) == 1:
            arguments[key] = by_workload
    return arguments


def _primary_groups(tensors: Sequence[dict], places: Sequence[dict],
                    arguments: Dict[Holder, Dict[str, List[int]]],
                    workloads: Sequence[dict]) -> Dict[str, Extent]:
    """Rules for the symbols of the signature's given tensors (forward arguments, then
    parameters and buffers, in signature order; outputs aside), each symbol from the first tensor
    that holds it: that tensor's module dims split into consecutive groups, one per signature
    dim, the cuts that give every workload's dims (how a family views its primary input:
    family_search.binding_dims; a conv weight [C, cog, KH, KW] is [c, cog, kd = 1, kh, kw]).
    A symbol no tensor binds this way is left to find_extent."""
    rules: Dict[str, Extent] = {}
    for spec, place in zip(tensors, places):
        if place["source"] == "output":
            continue
        holder: Holder = int(place["index"]) if place["source"] == "input" \
            else place.get("name", spec["name"])
        shape = spec["shape"]
        if holder not in arguments or any(str(e).isdigit() for e in shape) or \
                all(symbol in rules for symbol in shape):
            continue
        for symbol, rule in _groups(holder, shape, arguments[holder], workloads).items():
            rules.setdefault(symbol, rule)
    return rules


def _groups(holder: Holder, shape: Sequence[str], by_workload: Dict[str, List[int]],
            workloads: Sequence[dict]) -> Dict[str, Extent]:
    """The symbols of `shape` as consecutive groups of the module dims of `holder`, the first
    cuts that give every workload's dims; {} when none do."""
    rank = len(next(iter(by_workload.values())))
    cut_lists = itertools.combinations_with_replacement(range(rank + 1), len(shape) - 1)
    # Groups of one dim or more first: an empty group (extent 1) fits by accident more often.
    for cuts in sorted(cut_lists, key=lambda c: sum(a == b for a, b in _pairs(c, rank))):
        groups = _pairs(cuts, rank)
        if all(math.prod(by_workload[w["name"]][a:b]) == int(w["dims"][symbol])
               for w in workloads for symbol, (a, b) in zip(shape, groups)):
            return {symbol: (holder, a, b) for symbol, (a, b) in zip(shape, groups)}
    return {}


def _pairs(cuts: Sequence[int], rank: int) -> List[Tuple[int, int]]:
    bounds = [0, *cuts, rank]
    return list(zip(bounds[:-1], bounds[1:]))


def _symbols(tensors: Sequence[dict]) -> List[str]:
    seen: List[str] = []
    for spec in tensors:
        for extent in spec["shape"]:
            if not str(extent).isdigit() and extent not in seen:
                seen.append(extent)
    return seen


def _planned_tensor(spec: dict, place: dict, shapes: Dict[str, List[List[int]]],
                    i: int) -> PlannedTensor:
    if spec["dtype"] not in DTYPES:
        raise ValueError(f"signature tensor {spec['name']!r}: dtype {spec['dtype']!r} has no "
                         f"PyTorch counterpart here (known: {', '.join(DTYPES)})")
    shape = tuple(int(e) if str(e).isdigit() else e for e in spec["shape"])
    source = place["source"]
    key = place.get("name", spec["name"]) if source in ("parameter", "buffer") \
        else int(place["index"])
    same_rank = all(len(s[i]) == len(shape) for s in shapes.values())
    as_is = bool(spec.get("strided", False)) and source == "input" and same_rank
    return PlannedTensor(spec["name"], spec["role"], source, key, DTYPES[spec["dtype"]], shape,
                         as_is)


def _scalars(derived: dict, torch_table: dict) -> Tuple[PlannedScalar, ...]:
    """Each signature scalar from its `torch.scalars` entry: the one whose "name" is the
    scalar's (docs/torch_tasks.md), else, in a task derived before entries had names, the
    entry at the same position when it is a forward argument; none: the signature's value."""
    specs = derived["signature"].get("scalars", [])
    places = [p for p in torch_table.get("scalars", []) if isinstance(p, dict)]
    named = {p["name"]: p for p in places if "name" in p}
    planned = []
    for k, spec in enumerate(specs):
        place = named.get(spec["name"])
        if place is None and k < len(places) and "name" not in places[k]:
            place = places[k]
        place = place or {}
        source = place.get("source", "constant")
        key: Union[int, str, None] = None
        if source == "input" and "value" not in place:
            key = int(place["index"])
        elif source == "attribute":
            key = str(place["attribute"])
        else:
            source = "constant"
        planned.append(PlannedScalar(spec["name"], source, key, float(spec["value"])))
    return tuple(planned)
