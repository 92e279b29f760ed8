# Honest: the linear layer and a numerically stable softmax written out in torch ops.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        z = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        z = z - z.max(dim=1, keepdim=True).values
        e = z.exp()
        return e / e.sum(dim=1, keepdim=True)
