"""A CPU stand-in for the few parts of `triton` and `triton.language` that kernels/triton/softmax
/split_row.py uses, so that the variant's own text runs where Triton and CUDA are absent.

Each program of a launch is a Python thread whose tensors are torch CPU tensors (a program's
block is one tensor; a scalar is a 0-d tensor). Pointers are (flat tensor, element offsets).
At most `resident` programs run at once, started in a shuffled order, as a device that holds
only so many blocks would; a launch whose programs do not all finish within `timeout_s` raises
(the kernel waited for a program that could never start). Memory is sequentially consistent
here, so `sem=`, `scope=`, `cache_modifier=` and `debug_barrier` are accepted and do nothing:
the stand-in checks the kernel's arithmetic, indexing and progress argument, not its ordering
on real hardware.
"""

from __future__ import annotations

import random
import threading
import time
import types

import torch


class Abandoned(Exception):
    """Raised in the programs of a launch that timed out, at their next atomic, to end them."""


class Pointer:
    """Element offsets into a flat tensor; `dtype.element_ty` is the tensor's dtype. `abandoned`
    is its launch's event, set when the launch gives up on its programs."""

    def __init__(self, flat: torch.Tensor, offsets, abandoned: threading.Event):
        self.flat = flat
        self.offsets = torch.as_tensor(offsets, dtype=torch.int64)
        self.abandoned = abandoned
        self.dtype = types.SimpleNamespace(element_ty=flat.dtype)

    def __add__(self, offsets):
        return Pointer(self.flat, self.offsets + torch.as_tensor(offsets).to(torch.int64),
                       self.abandoned)

    __radd__ = __add__


_ATOMICS = threading.Lock()


def _as_block(value, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(value, dtype=like.dtype if like.is_floating_point() else None)


def load(pointer, mask=None, other=None, cache_modifier="", volatile=False):
    if mask is None:
        return pointer.flat[pointer.offsets].clone()
    mask = torch.as_tensor(mask)
    safe = torch.where(mask, pointer.offsets, torch.zeros_like(pointer.offsets))
    values = pointer.flat[safe]
    fill = torch.as_tensor(other if other is not None else 0, dtype=values.dtype)
    return torch.where(mask, values, fill)


def store(pointer, value, mask=None):
    value = torch.as_tensor(value).to(pointer.flat.dtype).expand(pointer.offsets.shape)
    if mask is None:
        pointer.flat[pointer.offsets] = value
        return
    mask = torch.as_tensor(mask).expand(pointer.offsets.shape)
    pointer.flat[pointer.offsets[mask]] = value[mask]


def atomic_add(pointer, value, mask=None, sem=None, scope=None):
    if pointer.offsets.dim() != 0:
        raise NotImplementedError("the stand-in's atomic_add takes one address")
    if pointer.abandoned.is_set():
        raise Abandoned()
    with _ATOMICS:
        old = pointer.flat[pointer.offsets].clone()
        pointer.flat[pointer.offsets] += value
    time.sleep(0)  # let the other programs run while this one polls
    return old


def where(condition, a, b):
    like = a if isinstance(a, torch.Tensor) else b
    return torch.where(torch.as_tensor(condition), _as_block(a, like), _as_block(b, like))


language = types.SimpleNamespace(
    constexpr=object, float32=torch.float32, int64=torch.int64, int32=torch.int32,
    load=load, store=store, atomic_add=atomic_add, where=where, exp=torch.exp,
    arange=lambda start, end: torch.arange(start, end, dtype=torch.int32),
    max=lambda x, axis: x.max(), sum=lambda x, axis: x.sum(), debug_barrier=lambda: None)


class Launcher:
    """`kernel[grid](*args, **constexprs)`: every program of the 1-D grid, as threads."""

    def __init__(self, fn, resident: int, timeout_s: float):
        self.fn, self.resident, self.timeout_s = fn, resident, timeout_s

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launch(grid[0], args, kwargs)

    def launch(self, programs: int, args, kwargs):
        kwargs.pop("num_warps", None)
        abandoned = threading.Event()
        args = [Pointer(a.reshape(-1), 0, abandoned) if isinstance(a, torch.Tensor) else a
                for a in args]
        slots = threading.Semaphore(self.resident)
        errors = []

        def program():
            with slots:
                try:
                    self.fn(*args, **kwargs)
                except Abandoned:
                    return
                except Exception as error:  # reported by the launch, below
                    errors.append(error)

        threads = [threading.Thread(target=program, daemon=True) for _ in range(programs)]
        random.shuffle(threads)
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + self.timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if errors:
            raise errors[0]
        stuck = sum(thread.is_alive() for thread in threads)
        if stuck:
            abandoned.set()
            for thread in threads:
                thread.join(1.0)
            raise TimeoutError(f"{stuck} of {programs} programs unfinished after "
                               f"{self.timeout_s} s with {self.resident} resident at once")


def triton_module(resident: int, timeout_s: float = 60.0) -> types.ModuleType:
    """A module to put in sys.modules as `triton` (its `language` as `triton.language`)."""
    module = types.ModuleType("triton")
    module.jit = lambda fn: Launcher(fn, resident, timeout_s)
    module.cdiv = lambda a, b: -(-a // b)
    module.next_power_of_2 = lambda n: 1 << max(0, (n - 1).bit_length())
    module.language = language
    return module
