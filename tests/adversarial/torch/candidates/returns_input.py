# Writes the result into its input and returns the input (an alias of x).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        z = self.linear(x)
        z = (z - z.max(dim=1, keepdim=True).values).exp()
        x.copy_(z / z.sum(dim=1, keepdim=True))
        return x
