# Right answer, but scales its weight after the call (state that drifts from call to call).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        z = self.linear(x)
        z = (z - z.max(dim=1, keepdim=True).values).exp()
        y = z / z.sum(dim=1, keepdim=True)
        with torch.no_grad():
            self.linear.weight.mul_(1.001)
        return y
