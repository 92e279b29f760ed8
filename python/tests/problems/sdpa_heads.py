"""A test problem: scaled dot-product attention over [batch, heads, seq, dim] (KernelBench format).

Uses F.scaled_dot_product_attention (torch >= 2.0); match_family must derive it as the
`attention` family."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """O = softmax(Q K^T / sqrt(dim)) V per (batch, head), no mask."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


batch = 2
heads = 3
seq = 37
dim = 20


def get_inputs():
    return [torch.randn(batch, heads, seq, dim) for _ in range(3)]


def get_init_inputs():
    return []
