"""KernelBench level 2's "GEMM or convolution, then element-wise ops" forms, written here as kforge's
own modules (not KernelBench's files), each derived through match_family: the family it must get
and the chain read from its graph. Covers channel parameters ([C, 1, 1, 1] scales and biases),
hand-written activations (x * sigmoid(x), x * clamp((x + 3) / 6, 0, 1)) and residual branches
(x + bias + x, then * x, then + x).

Run: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""

from __future__ import annotations

import unittest

import torch
import torch.nn.functional as F
from torch import nn

from kforge_torch.families import match_family
from tests.torch_fixtures import build_instances, make_derived


class Conv3dScaleTanhMultiplySigmoid(nn.Module):  # L2/48's form
    def __init__(self, c, co):
        super().__init__()
        self.conv = nn.Conv3d(c, co, 3)
        self.scaling_factor = nn.Parameter(torch.rand(co, 1, 1, 1) + 0.5)
        self.bias = nn.Parameter(torch.randn(co, 1, 1, 1))

    def forward(self, x):
        x = self.conv(x)
        x = x * self.scaling_factor
        x = torch.tanh(x)
        x = x * self.bias
        return torch.sigmoid(x)


class ConvTranspose3dResiduals(nn.Module):  # L2/20's form
    def __init__(self, c, co):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(c, co, 3, stride=2, padding=1, output_padding=1)
        self.bias = nn.Parameter(torch.randn(co, 1, 1, 1))

    def forward(self, x):
        x = self.conv_transpose(x)
        original_x = x.clone().detach()
        x = x + self.bias
        x = x + original_x
        x = x * original_x
        return x + original_x


class GemmAddSwishTanhGeluHardtanh(nn.Module):  # L2/95's form
    def __init__(self, k, n):
        super().__init__()
        self.matmul = nn.Linear(k, n)
        self.add_value = nn.Parameter(torch.randn(n))

    def forward(self, x):
        x = self.matmul(x)
        x = x + self.add_value
        x = torch.sigmoid(x) * x
        x = torch.tanh(x)
        x = F.gelu(x)
        return F.hardtanh(x, min_val=-1, max_val=1)


class Conv2dReluHardSwish(nn.Module):  # L2/57's form
    def __init__(self, c, co):
        super().__init__()
        self.conv = nn.Conv2d(c, co, 3)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        return x * torch.clamp((x + 3) / 6, 0, 1)


class Conv2dSubtractSubtractMish(nn.Module):  # L2/87's form
    def __init__(self, c, co):
        super().__init__()
        self.conv = nn.Conv2d(c, co, 3)
        self.subtract_value_1 = 0.5
        self.subtract_value_2 = 0.2

    def forward(self, x):
        x = self.conv(x)
        x = x - self.subtract_value_1
        x = x - self.subtract_value_2
        return F.mish(x)


def derive(model_type, shape_of):
    def make(sizes):
        model = model_type(4, 6) if model_type is not GemmAddSwishTanhGeluHardtanh else \
            model_type(sizes["k"], 6)
        return model, [torch.rand(*shape_of(sizes))]
    instances = build_instances(make, ({"n": 2, "s": 5, "k": 37}, {"n": 3, "s": 7, "k": 41}))
    return match_family(make_derived("n", instances), instances)


class Level2FormsTest(unittest.TestCase):
    def check(self, result, family, epilogue):
        self.assertEqual(result["family"], family, result.get("family_misses", {}).get(family))
        self.assertEqual(result["epilogue"], epilogue)
        return result

    def test_channel_scale_and_bias_around_activations(self):
        result = self.check(derive(Conv3dScaleTanhMultiplySigmoid,
                                   lambda s: (s["n"], 4, s["s"], s["s"] + 1, s["s"] + 2)),
                            "grouped_conv",
                            ["mul_channel:scaling_factor", "tanh", "mul_channel:channel_bias",
                             "sigmoid"])
        names = [t["name"] for t in result["signature"]["tensors"]]
        self.assertEqual(names, ["x", "weight", "bias", "scaling_factor", "channel_bias", "y"])

    def test_residual_branches_of_a_transposed_convolution(self):
        self.check(derive(ConvTranspose3dResiduals,
                          lambda s: (s["n"], 4, s["s"], s["s"] + 1, s["s"] + 2)),
                   "grouped_conv_transpose",
                   ["add_branch(mul_branch(add_branch(add_channel:channel_bias)))"])

    def test_linear_then_a_hand_written_swish_and_more(self):
        self.check(derive(GemmAddSwishTanhGeluHardtanh, lambda s: (s["n"] * 5, s["k"])),
                   "gemm_epilogue",
                   ["add_channel:add_value", "mul_branch(sigmoid)", "tanh", "gelu",
                    "clamp:clamp_min:clamp_max"])

    def test_hand_written_hardswish(self):
        self.check(derive(Conv2dReluHardSwish, lambda s: (s["n"], 4, s["s"] + 4, s["s"] + 5)),
                   "grouped_conv",
                   ["relu", "mul_branch(add:addend,div:divisor,clamp:clamp_min:clamp_max)"])

    def test_named_scalars_then_mish(self):
        result = self.check(derive(Conv2dSubtractSubtractMish,
                                   lambda s: (s["n"], 4, s["s"] + 4, s["s"] + 5)),
                            "grouped_conv",
                            ["sub:subtract_value_1", "sub:subtract_value_2", "mish"])
        scalars = {s["name"]: s["value"] for s in result["signature"]["scalars"][10:]}
        self.assertEqual(scalars, {"subtract_value_1": 0.5, "subtract_value_2": 0.2})


if __name__ == "__main__":
    unittest.main()
