"""The signature tensors of a problem: forward's inputs, the model's parameters and buffers, and
forward's outputs, with identifiers for names and the buffers that are state rather than input."""
import inspect
import re

import torch

from kforge_torch.input_rules import Entry
from kforge_torch.problem_run import DeriveError, describe, run_forward

DTYPE_NAMES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
               torch.bfloat16: "bf16", torch.int32: "i32", torch.int64: "i64",
               torch.bool: "bool"}


def identifier(name):
    """A valid identifier for a dotted module name: `ln.weight` -> `ln_weight`, `0.bias` ->
    `m0_bias` (kernel arguments and C++ names cannot start with a digit)."""
    text = re.sub(r"\W", "_", name)
    return f"m{text}" if text[:1].isdigit() else text


def forward_argument_names(model, count):
    """Names of forward's first `count` positional arguments; `input<i>` past a *args."""
    names = []
    for parameter in inspect.signature(model.forward).parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names.append(parameter.name)
    return [names[i] if i < len(names) else f"input{i}" for i in range(count)]


class _Names:
    """Hands out unique identifiers (a parameter named like an input gets a suffix)."""
    def __init__(self):
        self.used = set()

    def take(self, wanted):
        name, counter = wanted, 2
        while name in self.used:
            name, counter = f"{wanted}_{counter}", counter + 1
        self.used.add(name)
        return name


def state_buffers(built):
    """Dotted names of the buffers forward itself modifies (BatchNorm running statistics in
    training mode): state carried between calls, not inputs. The buffers are restored."""
    model = built.model
    before = {name: b.detach().clone() for name, b in model.named_buffers()}
    try:
        run_forward(model, built.inputs)
        return {name for name, b in model.named_buffers()
                if b.shape != before[name].shape or not torch.equal(b, before[name])}
    finally:
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(before[name])


def collect(built, output_count):
    """(tensor entries, scalar entries, notes) of a problem built at a gate workload.

    Tensors in signature order: forward's tensor inputs, float parameters, buffers that are
    neither integer nor modified by forward, then outputs (`out`, or `out0`, `out1`, ...).
    Scalars: forward's number arguments, as {"name", "index", "value", "dtype"}.
    Raises DeriveError for a get_inputs() element that is neither a tensor nor a number.
    """
    names, notes = _Names(), []
    tensors, scalars = [], []
    arguments = forward_argument_names(built.model, len(built.inputs))
    for index, value in enumerate(built.inputs):
        name = names.take(arguments[index])
        if isinstance(value, torch.Tensor):
            tensors.append(Entry(name, "input", index, value.dtype))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            dtype = "f64" if isinstance(value, float) else "i64"
            scalars.append({"name": name, "index": index, "value": value, "dtype": dtype})
        else:
            raise DeriveError(f"get_inputs() element {index} ('{arguments[index]}') is "
                              f"{describe(value)}; expected tensors and numbers")
    for dotted, parameter in built.model.named_parameters():
        tensors.append(Entry(names.take(identifier(dotted)), "parameter", dotted, parameter.dtype))
    state = state_buffers(built)
    for dotted, buffer in built.model.named_buffers():
        if not (buffer.is_floating_point() or buffer.dtype == torch.bool):
            notes.append(f"buffer '{dotted}' ({str(buffer.dtype)[6:]}) left out: integer "
                         "bookkeeping, not an input")
        elif dotted in state:
            notes.append(f"buffer '{dotted}' left out: forward modifies it (state carried "
                         "between calls, e.g. running statistics in training mode)")
        else:
            tensors.append(Entry(names.take(identifier(dotted)), "buffer", dotted, buffer.dtype))
    for index in range(output_count):
        wanted = "out" if output_count == 1 else f"out{index}"
        tensors.append(Entry(names.take(wanted), "output", index, None))
    return tensors, scalars, notes


def dtype_name(dtype, what):
    """kforge's name of a torch dtype ("f32"); DeriveError naming `what` when it has none."""
    if dtype not in DTYPE_NAMES:
        raise DeriveError(f"{what} is a {str(dtype)[6:]} tensor; kforge's tensors are "
                          f"{', '.join(DTYPE_NAMES.values())}")
    return DTYPE_NAMES[dtype]
