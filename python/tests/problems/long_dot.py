"""A test problem: matrix-vector product with a long reduction (K = 2^20) at its own size."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = A x for A of [rows, depth] and x of [depth, 1]."""

    def __init__(self):
        super().__init__()

    def forward(self, a, x):
        return torch.matmul(a, x)


rows = 64
depth = 1048576


def get_inputs():
    return [torch.rand(rows, depth), torch.rand(depth, 1)]


def get_init_inputs():
    return []
