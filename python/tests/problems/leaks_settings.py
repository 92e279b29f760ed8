"""A test problem that changes process-wide state when it loads: torch's default dtype and
random generator, a torch function replaced by a wrong one, a module put into sys.modules, and
prints on stdout from Python and from the file descriptor. A batch derivation must show none of
it to the problems after this one, and keep stdout for its results."""
import os
import sys
import types

import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)
torch.manual_seed(1234)
torch.softmax = lambda x, dim=None, **kwargs: torch.zeros_like(x)
torch.Tensor.softmax = lambda self, dim=None, **kwargs: torch.zeros_like(self)
sys.modules["kforge_leaked_module"] = types.ModuleType("kforge_leaked_module")
print("leaks_settings: a print on stdout")
os.write(1, b"leaks_settings: a write to file descriptor 1\n")


class Model(nn.Module):
    """Doubles its input (in whatever dtype it is given)."""

    def forward(self, x):
        return x * 2


n = 40


def get_inputs():
    return [torch.rand(n)]


def get_init_inputs():
    return []
