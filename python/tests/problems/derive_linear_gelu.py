import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer followed by GELU."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.nn.functional.gelu(self.proj(x))


batch_size = 512
in_features = 1024
out_features = 2048


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
