"""A test problem whose forward ends the whole process (os._exit), for a batch derivation that
must report it as this problem's error and go on."""
import os

import torch
import torch.nn as nn


class Model(nn.Module):
    """Exits the process with code 7."""

    def forward(self, x):
        os._exit(7)


n = 20


def get_inputs():
    return [torch.rand(n)]


def get_init_inputs():
    return []
