"""A test problem that misbehaves as asked by `mode`: writes its input, returns the wrong
number of elements, or returns a non-tensor."""
import torch
import torch.nn as nn

mode = "writes_input"
n = 12


class Model(nn.Module):
    """forward(x) for x of shape [n]; what it does wrong depends on the module constant mode."""

    def forward(self, x):
        if mode == "writes_input":
            x[5] = 42.0
            return x * 2
        if mode == "short_output":
            return x[:-1]
        if mode == "not_a_tensor":
            return 3.5
        return x + 1, x.sum()


def get_inputs():
    return [torch.rand(n)]


def get_init_inputs():
    return []
