import torch
import torch.nn as nn
import kforge_no_such_module


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return []
