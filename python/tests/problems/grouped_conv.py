import torch
import torch.nn as nn


class Model(nn.Module):
    """A grouped 2-D convolution: channels must stay multiples of the group count."""

    def __init__(self, in_channels, out_channels, kernel_size, groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, groups=groups, bias=False)

    def forward(self, x):
        return self.conv(x)


batch_size = 4
in_channels = 32
out_channels = 64
kernel_size = 3
groups = 8
height = 64
width = 48


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
