import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm2d in training mode (as the module is constructed)."""

    def __init__(self, channels):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.norm(x)


batch_size = 32
channels = 64
height = width = 96


def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
