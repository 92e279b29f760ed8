"""A test problem: softmax over the rows of a matrix (KernelBench format)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax along dim 1 of a [batch_size, dim] input."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 8
dim = 100


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
