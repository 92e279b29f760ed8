# Forgets the bias.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        z = x @ self.linear.weight.t()
        z = (z - z.max(dim=1, keepdim=True).values).exp()
        return z / z.sum(dim=1, keepdim=True)
