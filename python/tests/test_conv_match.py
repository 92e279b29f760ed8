"""grouped_conv_transpose served from a module's graph (kforge_torch/conv_match.py): transposed
convolutions of each rank with KernelBench level 1's kinds of geometry (grouped, strided, padded,
dilated, output padding) and near-misses that must not match.

Run: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""

from __future__ import annotations

import unittest

import torch
import torch.nn.functional as F
from torch import nn

from kforge_torch.conv_match import GEOMETRY, semantics, trace_conv
from kforge_torch.families import match_family
from kforge_torch.solution_plan import make_plan
from tests.torch_fixtures import build_instances, make_derived

# Two gate bindings of batch and spatial size (odd, so no dimension is confused with another).
SIZES = ({"n": 2, "s": 5}, {"n": 3, "s": 7})


def conv_module(rank, c, co, kernel, then=None, **options):
    """A Model holding nn.ConvTranspose{rank}d(c, co, kernel, **options); forward applies it and
    then `then` (when given)."""
    conv_type = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}[rank]

    def forward(self, x):
        y = self.conv(x)
        return then(y) if then is not None else y

    cls = type("Model", (nn.Module,), {"forward": forward})

    def make(sizes):
        model = cls()
        nn.Module.__init__(model)
        model.conv = conv_type(c, co, kernel, **options)
        spatial = [sizes["s"] + i for i in range(rank)]  # 5, 6, 7: each dimension its own size
        return model, [torch.rand(sizes["n"], c, *spatial)]
    return make


def match(make):
    instances = build_instances(make, SIZES)
    return match_family(make_derived("n", instances), instances)


class ConvTransposeMatchTest(unittest.TestCase):
    def check(self, result, geometry, has_bias):
        self.assertEqual(result["family"], "grouped_conv_transpose", result.get("family_misses"))
        names = [t["name"] for t in result["signature"]["tensors"]]
        self.assertEqual(names, ["x", "weight"] + (["bias"] if has_bias else []) + ["y"])
        got = [(s["name"], s["value"], s["dtype"]) for s in result["signature"]["scalars"]]
        self.assertEqual(got, [(n, v, "i64") for n, v in zip(GEOMETRY, geometry)])
        self.assertEqual(result["flops"], "2*n*c*d*h*w*cog*kd*kh*kw")
        return result

    def test_grouped_strided_3d_as_kernelbench_72(self):
        result = self.check(match(conv_module(3, 8, 8, (3, 5, 7), stride=(2, 2, 2),
                                              padding=(1, 2, 3), output_padding=(1, 1, 1),
                                              groups=4, bias=False)),
                            [2, 2, 2, 1, 2, 3, 1, 1, 1, 4], has_bias=False)
        # input 5 x 6 x 7 -> (5-1)*2 - 2 + 2 + 1 + 1 = 10, (6-1)*2 - 4 + 4 + 2 = 12, 14
        self.assertEqual(result["workloads"][0]["dims"],
                         {"n": 2, "c": 8, "d": 5, "h": 6, "w": 7, "cog": 2, "kd": 3, "kh": 5,
                          "kw": 7, "co": 8, "od": 10, "oh": 12, "ow": 14})

    def test_dilated_2d_with_bias_is_a_view(self):
        result = self.check(match(conv_module(2, 6, 9, (3, 2), stride=(2, 3), padding=(1, 0),
                                              dilation=(2, 1), groups=3)),
                            [1, 2, 3, 0, 1, 0, 1, 2, 1, 3], has_bias=True)
        dims = result["workloads"][1]["dims"]
        self.assertEqual((dims["d"], dims["kd"], dims["od"]), (1, 1, 1))
        self.assertEqual((dims["h"], dims["w"], dims["oh"], dims["ow"]),
                         (7, 8, (7 - 1) * 2 - 2 + 2 * 2 + 1, (8 - 1) * 3 + 1 + 1))
        # The module's own 4-D shapes stay what the reference and a solution see.
        self.assertEqual(result["torch"]["workloads"]["gate_1"]["shapes"][0], [3, 6, 7, 8])

    def test_output_extents_are_rules_a_solution_uses(self):
        # 2-D, groups 3, no bias: co (= groups * cog) and oh, ow are in no tensor a solution gets.
        result = self.check(match(conv_module(2, 6, 9, (3, 2), stride=(2, 3), padding=(1, 0),
                                              output_padding=(1, 0), dilation=(1, 2), groups=3,
                                              bias=False)),
                            [1, 2, 3, 0, 1, 0, 1, 1, 2, 3], has_bias=False)
        extents = result["torch"]["extents"]
        self.assertEqual(extents["co"], {"const": 0, "terms": [[3, "cog"]]})
        # oh = (h - 1) * 2 - 2 + 1 * (kh - 1) + 1 + 1 = 2 h + kh - 3
        self.assertEqual(extents["oh"], {"const": -3, "terms": [[2, "h"], [1, "kh"]]})
        plan = make_plan(result)
        symbols = dict(plan.symbols)
        self.assertEqual(symbols["cog"], ("conv.weight", 1, 2))  # not a coincidence of x's dims
        self.assertEqual(symbols["kd"], ("conv.weight", 2, 2))  # the 2-D weight's unit view
        self.assertEqual(symbols["ow"], ("linear", -4, ((3, "w"), (2, "kw"))))
        self.assertEqual(dict(plan.output_shapes)[0][1], ("linear", 0, ((3, "cog"),)))
        # A rule the workloads contradict is refused, naming the symbol.
        result["torch"]["extents"]["oh"]["const"] = -2
        with self.assertRaisesRegex(ValueError, "torch.extents.oh: gives"):
            make_plan(result)

    def test_1d(self):
        self.check(match(conv_module(1, 4, 4, 3, stride=2, padding=1)),
                   [1, 1, 2, 0, 0, 1, 1, 1, 1, 1], has_bias=True)

    def test_semantics_is_the_module(self):
        torch.manual_seed(0)
        conv = nn.ConvTranspose3d(4, 6, (2, 3, 1), stride=(1, 2, 3), padding=(0, 1, 0),
                                  output_padding=(0, 1, 2), groups=2, dilation=(2, 1, 1))
        x = torch.randn(2, 4, 3, 4, 5)
        y = conv(x)
        geometry = [1, 2, 3, 0, 1, 0, 2, 1, 1, 2]
        expected = semantics(x, conv.weight, conv.bias, geometry, y.shape)
        self.assertLess((expected - y.double()).abs().max().item(), 1e-5)

    def test_an_element_wise_chain_after_it_is_the_epilogue(self):
        # KernelBench level 2's ConvTranspose + scalar ops form (e.g. Clamp_Min_Divide).
        result = self.check_chain(
            match(conv_module(3, 4, 6, 3, stride=2, padding=1, groups=2,
                              then=lambda y: torch.clamp(F.gelu(y) * 0.5, -0.25, 0.75))),
            ["gelu", "mul:multiplier", "clamp:clamp_min:clamp_max"],
            {"multiplier": 0.5, "clamp_min": -0.25, "clamp_max": 0.75})
        self.assertIn("epilogue gelu, mul:multiplier", result["family_match"]["adapter"])

    def check_chain(self, result, ops, scalars):
        self.assertEqual(result["family"], "grouped_conv_transpose", result.get("family_misses"))
        self.assertEqual(result["epilogue"], ops)
        got = {s["name"]: s["value"] for s in result["signature"]["scalars"][len(GEOMETRY):]}
        self.assertEqual(got, scalars)
        return result

    def test_near_misses_say_why(self):
        cases = [
            (conv_module(2, 4, 4, 3, then=lambda y: torch.softmax(y, dim=1)),
             "not an element-wise op"),
            (conv_module(2, 4, 4, 3, then=lambda y: y.sum(dim=1)), "not an element-wise op"),
        ]
        for make, why in cases:
            with self.subTest(why=why):
                result = match(make)
                self.assertEqual(result["family"], "")
                self.assertIn(why, result["family_misses"]["grouped_conv_transpose"])

    def test_a_forward_convolution_is_no_match(self):
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 4, 3)

            def forward(self, x):
                return self.conv(x)
        result = match(lambda sizes: (Model(), [torch.rand(sizes["n"], 4, 9, 9)]))
        self.assertEqual(result["family"], "")
        self.assertIn("not an nn.ConvTranspose1d/2d/3d on the input",
                      result["family_misses"]["grouped_conv_transpose"])

    def test_functional_call_is_no_match(self):
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(4, 2, 3, 3))

            def forward(self, x):
                return F.conv_transpose2d(x, self.weight, stride=2)
        result = match(lambda sizes: (Model(), [torch.rand(sizes["n"], 4, 5, 5)]))
        self.assertEqual(result["family"], "")

    def test_trace_reasons(self):
        self.assertIn("takes 2 arguments", trace_conv(type("M", (nn.Module,), {
            "forward": lambda self, a, b: a + b})()))


if __name__ == "__main__":
    unittest.main()
