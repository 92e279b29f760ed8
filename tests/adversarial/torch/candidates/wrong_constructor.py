# Takes other constructor arguments than Model.
import torch
import torch.nn as nn


def _normalized_exp(z):
    e = (z - z.max(dim=1, keepdim=True).values).exp()
    return e / e.sum(dim=1, keepdim=True)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _normalized_exp(self.linear(x))
