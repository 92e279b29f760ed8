import torch
import torch.nn as nn


class Model(nn.Module):
    """Square root of each element: defined for non-negative inputs only."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sqrt(x) * 2.0


n = 100000


def get_inputs():
    return [torch.rand(n)]


def get_init_inputs():
    return []
