# Honest, with parameters of its own names: kforge matches them to Model's by order.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.w = nn.Parameter(torch.empty(features, features))
        self.b = nn.Parameter(torch.empty(features))

    def forward(self, x):
        z = x @ self.w.t() + self.b
        z = z - z.max(dim=1, keepdim=True).values
        e = z.exp()
        return e / e.sum(dim=1, keepdim=True)
