"""A test problem no built-in family computes: a linear layer, ReLU, then a halving.

forward applies the Linear's parameters through torch.matmul rather than calling the Linear:
gemm_epilogue serves "an nn.Linear call, then element-wise ops" (kforge_torch/gemm_match.py),
and the tests that use this problem need one that the templates generator cannot serve.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x @ weight.T + bias) / 2 for x of shape [batch_size, in_features]."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(torch.matmul(x, self.linear.weight.t()) + self.linear.bias) / 2


batch_size = 48
in_features = 192
out_features = 80


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
