# Defines the module under another name.
import torch
import torch.nn as nn


def _normalized_exp(z):
    e = (z - z.max(dim=1, keepdim=True).values).exp()
    return e / e.sum(dim=1, keepdim=True)


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return _normalized_exp(self.linear(x))
