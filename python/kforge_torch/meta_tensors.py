"""Shapes without memory: running a problem's construction and get_inputs() on meta tensors.

A problem's own sizes can be far too large for the host (KernelBench 23's input is 6.4 GB), yet
its workload needs their shapes. Meta tensors carry shape and dtype and no storage; most torch
operators (matmul, conv, softmax, triu, ...) compute their output shapes on them.
"""
import contextlib
import functools

import torch

# Tensor factories a problem file or a module's __init__ may call. Patching them (rather than only
# torch 2.x's `with torch.device("meta")`) also catches an explicit device="cuda" argument, and
# works on torch 1.13, which has no device context manager.
_FACTORIES = ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "randperm", "arange",
              "linspace", "logspace", "eye", "tensor", "as_tensor", "empty_strided", "normal",
              "bernoulli", "multinomial", "tril_indices", "triu_indices")


def _on_meta(factory):
    @functools.wraps(factory)
    def wrapper(*args, **kwargs):
        kwargs["device"] = "meta"
        kwargs.pop("pin_memory", None)
        kwargs.pop("generator", None)
        try:
            return factory(*args, **kwargs)
        except TypeError:
            # A factory without a device argument (torch.normal(mean_tensor, std)): its inputs
            # are meta already, so its result is too.
            del kwargs["device"]
            return factory(*args, **kwargs)
    return wrapper


@contextlib.contextmanager
def meta_factories():
    """Within this context, torch's tensor factories make meta tensors (no storage).

    Also enters torch 2.x's `torch.device("meta")` context when it exists, so that factories
    called through other names (e.g. `torch.nn.init`) follow. Restores everything on exit.
    """
    saved = {name: getattr(torch, name) for name in _FACTORIES if hasattr(torch, name)}
    for name, factory in saved.items():
        setattr(torch, name, _on_meta(factory))
    device_context = contextlib.nullcontext()
    try:
        meta_device = torch.device("meta")
        if hasattr(meta_device, "__enter__"):
            device_context = meta_device
    except (RuntimeError, TypeError):
        pass
    try:
        with device_context:
            yield
    finally:
        for name, factory in saved.items():
            setattr(torch, name, factory)


def tensor_bytes(tensor):
    """Bytes of `tensor`'s elements (as if contiguous), meta or not."""
    return tensor.numel() * tensor.element_size()
