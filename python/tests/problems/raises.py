"""A test problem whose forward always raises."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Raises ValueError in forward."""

    def forward(self, x):
        raise ValueError("this module refuses to run")


n = 16


def get_inputs():
    return [torch.rand(n)]


def get_init_inputs():
    return []
