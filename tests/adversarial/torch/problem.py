"""kforge's own test problem for the Python-candidate corpus: softmax over the rows of a square
linear layer, y = softmax(x @ W^T + b, dim=1), x [batch_size, features] -> y [batch_size,
features]. Square, so that a candidate can return (a view of) its input in place of y."""
import torch
import torch.nn as nn

batch_size = 8
features = 16


class Model(nn.Module):
    """forward(x): softmax(linear(x)) over dim 1."""

    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.softmax(self.linear(x), dim=1)


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features]
