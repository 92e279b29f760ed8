"""gemm_epilogue served from a module's graph (kforge_torch/gemm_match.py): KernelBench level 2's
forms and a user's own, and near-misses that must not match.

Run: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""

from __future__ import annotations

import unittest

import torch
import torch.nn.functional as F
from torch import nn

from kforge_torch.derive_tolerance import tensor_core_ops
from kforge_torch.families import match_family
from kforge_torch.epilogue_chain import apply_chain, trace_chain
from tests.torch_fixtures import build_instances, make_derived

# Two gate bindings: odd sizes, so M, K and N cannot be confused.
SIZES = ({"m": 5, "k": 37, "n": 3}, {"m": 3, "k": 64, "n": 7})


class LinearThen(nn.Module):
    """nn.Linear(k, n), then `then(self, y)`; float attributes as given."""

    def __init__(self, k, n, then, bias=True, **attributes):
        super().__init__()
        self.linear = nn.Linear(k, n, bias=bias)
        self.then = then
        for name, value in attributes.items():
            setattr(self, name, value)

    def forward(self, x):
        return type(self).__dict__.get("_then", self.then)(self, self.linear(x))


def module(then, bias=True, rank3=False, **attributes):
    # A fresh class per case: fx traces the class's forward, and `then` is part of it.
    cls = type("Model", (LinearThen,), {"forward": lambda self, x: then(self, self.linear(x))})

    def make(sizes):
        model = cls(sizes["k"], sizes["n"], then, bias=bias, **attributes)
        shape = (2, sizes["m"], sizes["k"]) if rank3 else (sizes["m"], sizes["k"])
        return model, [torch.rand(*shape)]
    return make


def match(make):
    instances = build_instances(make, SIZES)
    return match_family(make_derived("m", instances), instances)


class GemmEpilogueMatchTest(unittest.TestCase):
    def check(self, result, chain, scalars=None):
        self.assertEqual(result["family"], "gemm_epilogue", result.get("family_misses"))
        self.assertEqual(result["epilogue"], chain)
        names = [t["name"] for t in result["signature"]["tensors"]]
        self.assertEqual(names[:2], ["x", "weight"])
        self.assertEqual(names[-1], "y")
        got = {s["name"]: s["value"] for s in result["signature"]["scalars"]}
        self.assertEqual(got, scalars or {})
        return result

    def test_kernelbench_gemm_relu_divide(self):
        result = self.check(match(module(lambda s, y: torch.relu(y) / s.divisor, divisor=2.0)),
                            ["relu", "div:divisor"], {"divisor": 2.0})
        self.assertEqual(result["flops"], "2*M*N*K")
        self.assertEqual([w["dims"] for w in result["workloads"]],
                         [{"M": 5, "K": 37, "N": 3}, {"M": 3, "K": 64, "N": 7}])
        # The scalar is read from the model, so a solution built with another divisor keeps it.
        self.assertIn({"source": "attribute", "name": "divisor", "attribute": "divisor"},
                      result["torch"]["scalars"])

    def test_kernelbench_multiply_leaky_relu_module(self):
        self.check(match(module(lambda s, y: s.lrelu(y * s.multiplier), multiplier=2.0,
                                lrelu=nn.LeakyReLU(0.1))),
                   ["mul:multiplier", "leaky_relu:negative_slope"],
                   {"multiplier": 2.0, "negative_slope": 0.1})

    def test_kernelbench_scaling_residual_add(self):
        def then(s, y):
            original = y.clone().detach()
            return y * s.scaling_factor + original
        self.check(match(module(then, scaling_factor=0.5)), ["scale_residual:scaling_factor"],
                   {"scaling_factor": 0.5})

    def test_own_forms_functional_methods_and_no_bias(self):
        self.check(match(module(lambda s, y: F.gelu(y).clamp(-0.5, 0.75), bias=False)),
                   ["gelu", "clamp:clamp_min:clamp_max"], {"clamp_min": -0.5, "clamp_max": 0.75})
        self.check(match(module(lambda s, y: torch.sigmoid(y - 0.25).tanh())),
                   ["sub:subtrahend", "sigmoid", "tanh"], {"subtrahend": 0.25})
        self.check(match(module(lambda s, y: F.silu(y) * 3.0 + 1.0)),
                   ["swish", "mul:multiplier", "add:addend"], {"multiplier": 3.0, "addend": 1.0})

    def test_activations_of_kernelbench_level2(self):
        # Modules and functional forms of the activations level 2's GEMM / conv problems chain.
        self.check(match(module(lambda s, y: F.mish(F.hardswish(y)))), ["hardswish", "mish"])
        self.check(match(module(lambda s, y: F.softplus(F.hardsigmoid(y)))),
                   ["hardsigmoid", "softplus"])
        self.check(match(module(lambda s, y: s.act(y), act=nn.Mish())), ["mish"])
        # ELU and SELU are read, but PyTorch 1.13's cpu kernels compute exp(v) - 1 in fp32, whose
        # cancellation near 0 misses the probes' bound on small inputs: checked by reading here.
        model = module(lambda s, y: F.selu(s.act(F.elu(y, alpha=0.5))), act=nn.ELU())(
            SIZES[0])[0]
        chain = trace_chain(model)
        self.assertEqual(chain.ops, ["elu:alpha", "elu:alpha2", "selu"])
        self.assertEqual({n: v for n, (v, _) in chain.scalars.items()},
                         {"alpha": 0.5, "alpha2": 1.0})
        v = torch.linspace(-4, 4, 101, dtype=torch.float64)
        self.assertTrue(torch.allclose(apply_chain(v, chain.ops, {"alpha": 0.5, "alpha2": 1.0}),
                                       F.selu(F.elu(F.elu(v, alpha=0.5)))))
        result = match(module(lambda s, y: F.softplus(y, beta=2.0)))
        self.assertEqual(result["family"], "")
        self.assertIn("beta 2.0", result["family_misses"]["gemm_epilogue"])

    def test_a_value_combined_with_a_chain_of_it_is_a_branch_op(self):
        # KernelBench level 2's hand-written activations: x * torch.sigmoid(x) (59, 81, 95),
        # x * torch.clamp((x + 3) / 6, 0, 1) (57), x + s * sigmoid(x) (70), f(x) - x.
        self.check(match(module(lambda s, y: y * torch.sigmoid(y))), ["mul_branch(sigmoid)"])
        self.check(match(module(lambda s, y: torch.relu(y) * torch.clamp((torch.relu(y) + 3.0) /
                                                                         6.0, 0.0, 1.0))),
                   ["relu", "mul_branch(add:addend,div:divisor,clamp:clamp_min:clamp_max)"],
                   {"addend": 3.0, "divisor": 6.0, "clamp_min": 0.0, "clamp_max": 1.0})
        self.check(match(module(lambda s, y: y + torch.sigmoid(y) * 0.5)),
                   ["add_branch(sigmoid,mul:multiplier)"], {"multiplier": 0.5})
        self.check(match(module(lambda s, y: torch.sigmoid(y) - y)), ["rsub_branch(sigmoid)"])
        # Two chains of which neither continues the other are a miss, with the reason.
        result = match(module(lambda s, y: torch.sigmoid(y) * torch.tanh(y)))
        self.assertEqual(result["family"], "")
        self.assertIn("neither continues the other's chain", result["family_misses"]["gemm_epilogue"])

    def test_batched_input_is_a_view(self):
        result = self.check(match(module(lambda s, y: y.relu(), rank3=True)), ["relu"])
        self.assertEqual(result["workloads"][0]["dims"], {"M": 10, "K": 37, "N": 3})

    def test_near_misses_say_why(self):
        cases = [
            (lambda s, y: 2.0 / y, "tensor on the right"),
            (lambda s, y: y * y, "neither continues the other's chain"),
            (lambda s, y: torch.softmax(y, dim=-1), "not an element-wise op"),
            (lambda s, y: y.relu() + s.linear.weight.sum(), "reads parameter linear.weight other"),
        ]
        for then, why in cases:
            with self.subTest(why=why):
                result = match(module(then))
                self.assertEqual(result["family"], "")
                self.assertIn(why, result["family_misses"]["gemm_epilogue"])

    def test_in_place_ops(self):
        # Functional twins where nothing else reads the changed tensor...
        self.check(match(module(lambda s, y: F.relu(y, inplace=True) / 2.0)), ["relu", "div:divisor"],
                   {"divisor": 2.0})
        # ...and a miss where a later op reads what the in-place op changed unseen.
        def hidden(s, y):
            F.hardtanh(y, -1e4, 1e4, inplace=True)
            return y / 2.0
        result = match(module(hidden))
        self.assertEqual(result["family"], "")
        self.assertIn("unused", result["family_misses"]["gemm_epilogue"])

    def test_a_scalar_never_takes_a_tensor_name(self):
        result = self.check(match(module(lambda s, y: y + s.bias_value, bias_value=0.25)),
                            ["add:bias_value"], {"bias_value": 0.25})
        class Shadow(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(37, 3)
                self.y = 0.5  # a float attribute named like the output tensor

            def forward(self, x):
                return self.linear(x) * 0.5
        chain = trace_chain(Shadow())
        self.assertEqual(chain.ops, ["mul:multiplier"])

    def test_a_chain_the_graph_hides_is_caught_by_probing(self):
        # Data-dependent control flow cannot be traced: no match, with the reason.
        def then(s, y):
            return y.relu() if float(y.sum()) > 0 else y
        result = match(module(then))
        self.assertEqual(result["family"], "")
        self.assertIn("torch.fx", result["family_misses"]["gemm_epilogue"])

    def test_a_per_column_parameter_is_a_channel_tensor(self):
        # y = gelu(x W^T + b) * self.gain, gain [N] (or [1, N]): one value per output column.
        def make_with(shape, then=lambda s, y: F.gelu(y) * s.gain):
            def make(sizes):
                model = module(then)(sizes)[0]
                model.gain = nn.Parameter(torch.rand(*shape(sizes)) + 0.5)
                return model, [torch.rand(sizes["m"], sizes["k"])]
            return make
        for shape in (lambda sizes: (sizes["n"],), lambda sizes: (1, sizes["n"])):
            result = self.check(match(make_with(shape)), ["gelu", "mul_channel:gain"])
            tensors = result["signature"]["tensors"]
            self.assertEqual([(t["name"], t["shape"]) for t in tensors[2:]],
                             [("bias", ["N"]), ("gain", ["N"]), ("y", ["M", "N"])])
        # A [M, 1] parameter would scale rows, not columns: a miss with the reason.
        result = match(make_with(lambda sizes: (sizes["m"], 1), lambda s, y: y * s.gain))
        self.assertEqual(result["family"], "")
        self.assertIn("not one value per output channel", result["family_misses"]["gemm_epilogue"])

    def test_trace_chain_needs_the_linear_first(self):
        class ScaledInput(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(4, 4)

            def forward(self, x):
                return self.linear(x * 2.0)
        self.assertIn("not an nn.Linear on the input", trace_chain(ScaledInput()))


class TensorCoreOpsTest(unittest.TestCase):
    """Where a derived task asks for an fp32 model (the precision rule): modules with work that
    tensor cores could do at reduced precision."""

    def test_linear_conv_matmul_and_the_at_operator(self):
        self.assertIn("Linear", tensor_core_ops(nn.Linear(3, 4)))
        self.assertIn("Conv2d", tensor_core_ops(nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU())))

        class Bmm(nn.Module):
            def forward(self, a, b):
                return torch.bmm(a, b).relu()

        class At(nn.Module):
            def forward(self, a, b):
                return (a @ b).sum(-1)
        self.assertEqual(tensor_core_ops(Bmm()), ["bmm"])
        self.assertEqual(tensor_core_ops(At()), ["@"])

    def test_element_wise_and_normalizing_modules_have_none(self):
        class Norm(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=-1) * torch.sigmoid(x)
        self.assertEqual(tensor_core_ops(Norm()), [])
        self.assertEqual(tensor_core_ops(nn.LayerNorm(8)), [])


if __name__ == "__main__":
    unittest.main()
