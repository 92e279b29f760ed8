import torch
import torch.nn as nn


class Model(nn.Module):
    """A grouped, strided, padded and dilated 2-D transposed convolution with a bias."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                         padding=padding, dilation=dilation, groups=groups)

    def forward(self, x):
        return self.deconv(x)


batch_size = 2
in_channels = 12
out_channels = 6
kernel_size = (3, 2)
stride = (2, 3)
padding = (1, 0)
dilation = (1, 2)
groups = 3
height = 20
width = 24


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, groups]
