import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {"y": x * 2}


size = 64


def get_inputs():
    return [torch.rand(size, size)]


def get_init_inputs():
    return []
