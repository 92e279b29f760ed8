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

from kforge_torch.conv_match import FORWARD, GEOMETRY, semantics, trace_conv
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
        self.assertEqual(symbols["ow"], ("linear", -4, ((3, "w"), (2, "kw")), 1))
        self.assertEqual(dict(plan.output_shapes)[0][1], ("linear", 0, ((3, "cog"),), 1))
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

    def test_a_forward_convolution_is_the_forward_family(self):
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 4, 3)

            def forward(self, x):
                return self.conv(x)
        result = match(lambda sizes: (Model(), [torch.rand(sizes["n"], 4, 9, 9)]))
        self.assertEqual(result["family"], "grouped_conv")
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


def forward_module(rank, c, co, kernel, then=None, **options):
    """conv_module's twin with nn.Conv{rank}d; `then(y, model)` may read the model's
    attributes (a per-channel parameter)."""
    conv_type = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[rank]

    def forward(self, x):
        y = self.conv(x)
        return then(y, self) if then is not None else y

    cls = type("Model", (nn.Module,), {"forward": forward})

    def make(sizes):
        model = cls()
        nn.Module.__init__(model)
        model.conv = conv_type(c, co, kernel, **options)
        model.shift = nn.Parameter(torch.randn([co] + [1] * rank))
        model.register_buffer("scale", torch.rand([co] + [1] * rank) + 0.5)
        model.unit = nn.Parameter(torch.randn([1] * (rank + 1)))  # broadcasts, not per channel
        spatial = [sizes["s"] + 4 + i for i in range(rank)]  # 9, 10, 11
        return model, [torch.rand(sizes["n"], c, *spatial)]
    return make


class ConvForwardMatchTest(unittest.TestCase):
    def check(self, result, geometry, tensors):
        self.assertEqual(result["family"], "grouped_conv", result.get("family_misses"))
        names = [t["name"] for t in result["signature"]["tensors"]]
        self.assertEqual(names, ["x", "weight"] + tensors + ["y"])
        shapes = {t["name"]: t["shape"] for t in result["signature"]["tensors"]}
        self.assertEqual(shapes["weight"], ["co", "cig", "kd", "kh", "kw"])
        got = [s["value"] for s in result["signature"]["scalars"][:len(GEOMETRY)]]
        self.assertEqual(got, geometry)
        self.assertEqual(result["flops"], "2*n*co*od*oh*ow*cig*kd*kh*kw")
        return result

    def test_conv_relu_then_a_channel_bias_as_kernelbench_l2_1(self):
        # nn.Conv2d, relu, + self.shift [C, 1, 1]: the shift is a channel tensor of the chain,
        # the kernels' last input.
        result = self.check(match(forward_module(2, 6, 4, 3, then=lambda y, m: torch.relu(y) +
                                                 m.shift)),
                            [1, 1, 1, 0, 0, 0, 1, 1, 1, 1], ["bias", "shift"])
        self.assertEqual(result["epilogue"], ["relu", "add_channel:shift"])
        self.assertEqual(result["signature"]["tensors"][3]["shape"], ["co"])
        # 9 x 10 input, 3 x 3 kernel: 7 x 8.
        dims = result["workloads"][0]["dims"]
        self.assertEqual((dims["oh"], dims["ow"], dims["co"], dims["cig"]), (7, 8, 4, 6))
        # The module's own [C, 1, 1] shape stays what the reference and a solution see.
        self.assertEqual(result["torch"]["workloads"]["gate_0"]["shapes"][3], [4, 1, 1])

    def test_grouped_strided_dilated_3d_with_a_buffer_and_scalars(self):
        result = self.check(match(forward_module(
            3, 6, 9, (3, 2, 3), stride=(2, 1, 3), padding=(1, 2, 0), dilation=(1, 2, 1),
            groups=3, bias=False, then=lambda y, m: (y * m.scale - m.shift) / 2.0)),
            [2, 1, 3, 1, 2, 0, 1, 2, 1, 3], ["scale", "shift"])
        self.assertEqual(result["epilogue"], ["mul_channel:scale", "sub_channel:shift",
                                              "div:divisor"])
        extents = result["torch"]["extents"]
        self.assertNotIn("co", extents)  # a forward weight holds co
        # od = floor((d + 2 - 2 - 1) / 2) + 1 = floor((d - 1 + 2) / 2): 9 -> 5, 10 -> 5
        self.assertEqual(extents["od"], {"const": 2 * 1 + 1 - 1 + 2, "terms": [[1, "d"],
                                                                            [-1, "kd"]],
                                            "div": 2})
        for workload in result["workloads"]:
            dims = workload["dims"]
            for out, size, k, i in (("od", "d", "kd", 0), ("oh", "h", "kh", 1),
                                    ("ow", "w", "kw", 2)):
                rule = extents[out]
                value = (rule["const"] + sum(c * dims[s] for c, s in rule["terms"])) // rule["div"]
                self.assertEqual(value, dims[out], (workload["name"], out))
        plan = make_plan(result)
        self.assertEqual(dict(plan.symbols)["co"], ("conv.weight", 0, 1))

    def test_depthwise_1d_and_valid_padding(self):
        self.check(match(forward_module(1, 4, 4, 3, groups=4, padding="valid", bias=False)),
                   [1, 1, 1, 0, 0, 0, 1, 1, 1, 4], [])

    def test_depthwise_groups_that_follow_the_channels_come_from_the_shapes(self):
        # KernelBench L1/82's form: groups = in_channels, which the gate workloads vary.
        def make(sizes):
            c = 2 * sizes["n"]  # 4, then 6 channels
            model = nn.Sequential()
            model.conv = nn.Conv2d(c, c, 3, groups=c, bias=False)
            return model, [torch.rand(2, c, 9, 10)]
        instances = build_instances(make, SIZES)
        self.assertEqual([i[1].conv.groups for i in instances], [4, 6])
        result = self.check(match_family(make_derived("n", instances), instances),
                            [1, 1, 1, 0, 0, 0, 1, 1, 1, 0], [])
        self.assertIn("groups 0", result["family_match"]["adapter"])

    def test_semantics_is_the_module(self):
        torch.manual_seed(0)
        conv = nn.Conv3d(4, 6, (2, 3, 1), stride=(1, 2, 3), padding=(0, 1, 0), groups=2,
                         dilation=(2, 1, 1))
        shift = torch.randn(6, 1, 1, 1)
        x = torch.randn(2, 4, 5, 6, 7)
        y = torch.sigmoid(conv(x)) * shift
        geometry = [1, 2, 3, 0, 1, 0, 2, 1, 1, 2]
        expected = semantics(x, conv.weight, conv.bias, geometry, y.shape,
                             ["sigmoid", "mul_channel:shift"], {}, {"shift": shift},
                             kind=FORWARD)
        self.assertLess((expected - y.double()).abs().max().item(), 1e-5)

    def test_near_misses_say_why(self):
        cases = [
            # A parameter broadcast along the width, not one value per channel.
            (forward_module(2, 4, 4, 3, then=lambda y, m: y + m.unit),
             "not one value per output channel"),
            (forward_module(2, 4, 4, 3, then=lambda y, m: y + m.shift[:1]),
             "other than as v + p"),
            (forward_module(2, 4, 4, 3, then=lambda y, m: m.shift - y), "parameter on the left"),
            (forward_module(2, 4, 4, 3, then=lambda y, m: torch.max_pool2d(y, 2)),
             "not an element-wise op"),
            (forward_module(2, 4, 4, 3, padding_mode="reflect"), "padding mode 'reflect'"),
        ]
        for make, why in cases:
            with self.subTest(why=why):
                result = match(make)
                self.assertEqual(result["family"], "")
                self.assertIn(why, result["family_misses"]["grouped_conv"])


if __name__ == "__main__":
    unittest.main()
