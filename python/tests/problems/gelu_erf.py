"""A test problem: element-wise GELU (erf form) of a 3-d input."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.gelu of a [batch_size, rows, dim] input."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


batch_size = 8
rows = 64
dim = 1000


def get_inputs():
    return [torch.randn(batch_size, rows, dim)]


def get_init_inputs():
    return []
