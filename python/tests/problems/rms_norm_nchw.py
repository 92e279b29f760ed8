"""A test problem: RMS normalization over the channels of an NCHW input, eps a constructor
argument."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """x / sqrt(mean(x^2 over C) + eps) for x of [batch_size, features, height, width]."""

    def __init__(self, num_features: int, eps: float = 1e-5):
        super(Model, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x / rms


batch_size = 4
features = 16
height = 24
width = 40


def get_inputs():
    return [torch.rand(batch_size, features, height, width)]


def get_init_inputs():
    return [features]
