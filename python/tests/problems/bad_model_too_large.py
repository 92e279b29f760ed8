import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer with 2^40 weights (4 TiB): no device holds it."""

    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x):
        return self.proj(x)


batch_size = 8
features = 1 << 20


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features]
