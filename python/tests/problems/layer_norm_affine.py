"""A test problem: layer normalization over the last two dims with a learned weight and bias."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.LayerNorm over (features, dim) of a [batch_size, features, dim] input."""

    def __init__(self, normalized_shape):
        super(Model, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 16
features = 24
dim = 40


def get_inputs():
    return [torch.rand(batch_size, features, dim)]


def get_init_inputs():
    return [(features, dim)]
