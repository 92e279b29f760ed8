import torch
import torch.nn as nn


class Model(nn.Module):
    """A convolution, then max pooling: no family serves it (pooling is not element-wise)."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(self.conv(x))


batch_size = 4
in_channels = 8
out_channels = 16
kernel_size = 3
height = 34
width = 30


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
