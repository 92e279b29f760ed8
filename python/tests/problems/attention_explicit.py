"""A test problem: self-attention written out (softmax of scaled scores, then a matmul), with
variants that are not the `attention` family: a causal mask, or another scale.

MODE: "plain" (softmax(q k^T / sqrt(dim)) v), "causal" (keys after the query masked out),
"scale" (scores divided by dim instead of sqrt(dim)), "sdpa_causal" and "sdpa_scale" (the same
two through F.scaled_dot_product_attention's is_causal and scale arguments; torch >= 2.1)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, q, k, v):
        if self.mode == "sdpa_causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.mode == "sdpa_scale":
            return F.scaled_dot_product_attention(q, k, v, scale=1.0 / q.shape[-1])
        divisor = q.shape[-1] if self.mode == "scale" else math.sqrt(q.shape[-1])
        scores = torch.matmul(q, k.transpose(-2, -1)) / divisor
        if self.mode == "causal":
            s = q.shape[-2]
            mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


MODE = "plain"
batch = 4
seq = 29
dim = 24


def get_inputs():
    return [torch.randn(batch, seq, dim) for _ in range(3)]


def get_init_inputs():
    return [MODE]
