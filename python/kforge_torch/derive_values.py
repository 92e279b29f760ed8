"""Generated input values for the derivation's distribution tests.

The derivation decides which of kforge's input distributions a task lists by running the forward
on generated values. The values that count are kforge's own (`src/worker/input_generator.h`,
reached through the C ABI of `libkforge_inputs.so`): `generate` uses that library when
`$KFORGE_INPUTS_LIB` names it. Without it (a checkout that has not built the library), a torch
stand-in draws from the same distributions, not the same bytes: enough to see whether the forward
stays finite. `python/kforge_torch/inputs.py` (the reference worker's) is the one place that will
own this; `derive(..., options={"generate": f})` takes any function of this signature.
"""
import ctypes
import os

import torch

DISTRIBUTIONS = ("uniform", "normal", "heavy_tailed", "small")
_DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3,
                torch.int32: 4, torch.int64: 5}
_library = None


def _load_library():
    """The C ABI library named by $KFORGE_INPUTS_LIB, or None when unset or unusable."""
    global _library
    if _library is None:
        path = os.environ.get("KFORGE_INPUTS_LIB", "")
        _library = False
        if path:
            try:
                library = ctypes.CDLL(path)
                library.kforge_fill_input_host.argtypes = [
                    ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_uint64, ctypes.c_int,
                    ctypes.c_int]
                library.kforge_inputs_last_error.restype = ctypes.c_char_p
                if library.kforge_inputs_abi_version() == 1:
                    _library = library
            except OSError:
                pass
    return _library or None


def generate(shape, dtype, seed, tensor_index, distribution):
    """A CPU tensor of `shape` and torch `dtype` with values of `distribution` (a name of
    DISTRIBUTIONS), deterministic in (seed, tensor_index): uniform in [-1, 1), standard normal,
    heavy-tailed (sign x 10^u, u uniform in [-3, 3)), small (uniform x 2^-10).

    Raises ValueError for an unknown distribution or dtype, RuntimeError when the library fails.
    """
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution '{distribution}'")
    if dtype not in _DTYPE_CODES:
        raise ValueError(f"no generated values for dtype {dtype}")
    library = _load_library()
    if library is not None:
        out = torch.empty(tuple(shape), dtype=dtype)
        status = library.kforge_fill_input_host(
            out.data_ptr(), out.numel(), _DTYPE_CODES[dtype], seed, tensor_index,
            DISTRIBUTIONS.index(distribution))
        if status != 0:
            raise RuntimeError(library.kforge_inputs_last_error().decode())
        return out
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
