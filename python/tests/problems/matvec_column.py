"""A test problem: matrix times a column vector, the vector of shape (K, 1) (KernelBench 4's
layout at a size the cpu backend times quickly)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B for A of [rows, depth] and B of [depth, 1]."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


rows = 512
depth = 4096


def get_inputs():
    return [torch.rand(rows, depth), torch.rand(depth, 1)]


def get_init_inputs():
    return []
