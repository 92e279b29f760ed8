import torch
import torch.nn as nn


class Model(nn.Module):
    """A matrix times a scalar argument of forward."""

    def __init__(self):
        super().__init__()

    def forward(self, A, s):
        return A * s


M = 1024 * 4
N = 512


def get_inputs():
    return [torch.rand(M, N), 2.5]


def get_init_inputs():
    return []
