"""A test problem whose forward is random: dropout in training mode (as KernelBench builds it)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU then dropout(p = 0.1)."""

    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(torch.relu(x))


batch_size = 64
dim = 300


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
