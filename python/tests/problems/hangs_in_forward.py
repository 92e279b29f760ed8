"""A test problem whose forward never returns (it sleeps in a loop), for the per-problem time
limit of a batch derivation."""
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    """Never returns."""

    def forward(self, x):
        while True:
            time.sleep(0.05)


n = 20


def get_inputs():
    return [torch.rand(n)]


def get_init_inputs():
    return []
