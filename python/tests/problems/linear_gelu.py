"""A test problem: a linear layer then GELU; its weight and bias are signature inputs."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = gelu(x @ weight.T + bias) for x of shape [batch_size, *input_shape]."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        print("building a linear layer", in_features, "->", out_features)

    def forward(self, x):
        print("forward on", tuple(x.shape))
        return torch.nn.functional.gelu(self.linear(x))


batch_size = 4
in_features = 32
out_features = 16
input_shape = (in_features,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return [in_features, out_features]
