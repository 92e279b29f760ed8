"""Generated input values for the derivation's distribution tests.

The derivation decides which of kforge's input distributions a task lists by running the forward
on generated values. The values that count are kforge's own (`src/worker/input_generator.h`,
reached through the C ABI of `libkforge_inputs.so`): `generate` uses that library when
`$KFORGE_INPUTS_LIB` names it. Without it (a checkout that has not built the library), a torch
stand-in draws from the same distributions, not the same bytes: enough to see whether the forward
stays finite. The library's bindings are inputs.py's (the reference worker's), used here too;
`derive(..., options={"generate": f})` takes any function of this signature.
"""
import os

import torch

from kforge_torch import inputs

DISTRIBUTIONS = ("uniform", "normal", "heavy_tailed", "small")
_DTYPE_NAMES = {dtype: name for name, dtype in inputs.TORCH_DTYPES.items()}


def generate(shape, dtype, seed, tensor_index, distribution):
    """A CPU tensor of `shape` and torch `dtype` with values of `distribution` (a name of
    DISTRIBUTIONS), deterministic in (seed, tensor_index): uniform in [-1, 1), standard normal,
    heavy-tailed (sign x 10^u, u uniform in [-3, 3)), small (uniform x 2^-10).

    Raises ValueError for an unknown distribution or dtype, RuntimeError when the library fails.
    """
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution '{distribution}'")
    if dtype not in _DTYPE_NAMES:
        raise ValueError(f"no generated values for dtype {dtype}")
    if os.environ.get("KFORGE_INPUTS_LIB"):
        try:
            # The reference worker's loader (inputs.py): one copy of the C ABI's bindings.
            return inputs.generate(_DTYPE_NAMES[dtype], tuple(shape), seed, tensor_index,
                                   distribution)
        except inputs.InputsLibraryError as error:
            if "kforge_fill_input" in str(error):
                raise  # the library failed on these arguments (a RuntimeError)
            # An unusable library: the stand-in still tells finite from non-finite.
    return _stand_in(tuple(shape), dtype, seed, tensor_index, distribution)


def _stand_in(shape, dtype, seed, tensor_index, distribution):
    """The torch stand-in: the same distributions as kforge's generator, other bytes."""
    generator = torch.Generator().manual_seed(seed * 1000003 + tensor_index)
    if distribution == "normal":
        values = torch.randn(shape, generator=generator, dtype=torch.float64)
    else:
        values = torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1
        if distribution == "heavy_tailed":
            exponent = torch.rand(shape, generator=generator, dtype=torch.float64) * 6 - 3
            values = torch.sign(values) * torch.pow(10.0, exponent)
        elif distribution == "small":
            values = values * 2.0 ** -10
    return values.to(dtype)
