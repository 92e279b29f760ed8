"""Symbolic shapes: naming each tensor dimension after what it varies with across workloads."""
from kforge_torch.problem_run import DeriveError


def name_dimensions(tensor_shapes, named, priority):
    """Symbolic shapes for tensors whose concrete shapes are known at several workloads.

    tensor_shapes: [(tensor name, {workload: shape tuple})], every tensor at the same workloads.
    named: {workload: {label: int}}, the module's integer constants at each workload.
    priority: labels in the order to prefer when several equal a dimension everywhere.

    A dimension that never changes is the fixed literal ("3"); one that equals the constant
    `label` at every workload is named `label`; any other is `<tensor>_d<k>` (reused by another
    dimension with the same values everywhere). Only constants that themselves vary name
    dimensions: a fixed dimension equal to `dim = 1` is not about `dim`.
    Returns (shapes {tensor: [str]}, dims {workload: {symbol: int}}). Raises DeriveError when a
    tensor's rank differs between workloads.
    """
    workloads = list(named)
    varying = [label for label in priority
               if len({named[w].get(label) for w in workloads}) > 1
               and all(label in named[w] for w in workloads)]
    auto = {}  # value vector -> symbol, for dimensions no constant explains
    shapes, dims = {}, {w: {} for w in workloads}
    for tensor, by_workload in tensor_shapes:
        ranks = {len(by_workload[w]) for w in workloads}
        if len(ranks) > 1:
            detail = ", ".join(f"{w}: {list(by_workload[w])}" for w in workloads)
            raise DeriveError(f"tensor '{tensor}' changes rank between workloads ({detail})")
        symbols = []
        for k in range(ranks.pop()):
            vector = tuple(by_workload[w][k] for w in workloads)
            symbol = _symbol(tensor, k, vector, varying, named, workloads, auto)
            symbols.append(symbol)
            if not symbol.isdigit():
                for w, value in zip(workloads, vector):
                    dims[w][symbol] = value
        shapes[tensor] = symbols
    return shapes, dims


def _symbol(tensor, k, vector, varying, named, workloads, auto):
    if len(set(vector)) == 1:
        return str(vector[0])
    for label in varying:
        if all(named[w][label] == value for w, value in zip(workloads, vector)):
            return label
    if vector not in auto:
        auto[vector] = f"{tensor}_d{k}"
    return auto[vector]


def evaluate_shape(symbols, named_at):
    """The concrete shape of symbolic `symbols` from the constants `named_at` ({label: int}), or
    None when a symbol is not a constant (a `<tensor>_d<k>` dimension cannot be predicted)."""
    shape = []
    for symbol in symbols:
        if symbol.isdigit():
            shape.append(int(symbol))
        elif symbol in named_at:
            shape.append(named_at[symbol])
        else:
            return None
    return tuple(shape)
