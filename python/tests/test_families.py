"""match_family on modules written here: each family's op in torch's and a user's own form, and
near-misses that must not match.

Run: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""

from __future__ import annotations

import copy
import math
import unittest

import torch
from torch import nn

from kforge_torch.families import match_family
from kforge_torch.family_probe import compare
from tests.torch_fixtures import build_instances, make_derived

# Two gate bindings of sizes, not multiples of anything, so rows and cols cannot be confused.
SIZES = ({"a": 5, "b": 37, "c": 3, "d": 7}, {"a": 3, "b": 64, "c": 4, "d": 6})


def match(name, make, sizes=SIZES):
    instances = build_instances(make, sizes)
    return match_family(make_derived(name, instances), instances), instances


class Lambda(nn.Module):
    """forward(*xs) = fn(*xs): the op under test with no parameters."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


class ExpSumSoftmax(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
        return e / e.sum(dim=-1, keepdim=True)


class LastDimRMSNorm(nn.Module):
    """RMSNorm over the last dim with a weight; eps_inside=False puts eps outside the sqrt."""

    def __init__(self, features, eps=1e-5, eps_inside=True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.eps, self.eps_inside = eps, eps_inside

    def forward(self, x):
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)
        rms = torch.sqrt(mean_square + self.eps) if self.eps_inside else \
            torch.sqrt(mean_square) + self.eps
        return x / rms * self.weight


class ChannelRMSNorm(nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(torch.mean(x * x, dim=1, keepdim=True) + self.eps)


class TanhGelu(nn.Module):
    def forward(self, x):
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))
        return 0.5 * x * (1.0 + torch.tanh(inner))


def unary(fn, rank=2):
    """make(sizes) for a parameterless module on one input of `rank` dims."""
    keys = ("a", "b", "c", "d")[:rank]
    return lambda s: (Lambda(fn), [torch.randn(*[s[k] for k in keys])])


class MatchesTest(unittest.TestCase):
    def assertFamily(self, result, family):
        self.assertEqual(result["family"], family, result["family_misses"])
        self.assertEqual(result["family_match"]["family"], family)

    def test_softmax_dim1_and_own_exp_sum(self):
        result, _ = match("softmax", unary(lambda x: torch.softmax(x, dim=1)))
        self.assertFamily(result, "softmax")
        self.assertEqual(result["workloads"][0]["dims"], {"rows": 5, "cols": 37})
        self.assertEqual(result["flops"], "5*rows*cols")
        result, _ = match("own_softmax", unary(ExpSumSoftmax(), rank=3))
        self.assertFamily(result, "softmax")
        self.assertEqual(result["workloads"][1]["dims"], {"rows": 3 * 64, "cols": 4})
        self.assertIn("rows = prod(shape[0:2]), cols = shape[2]", result["family_match"]["adapter"])

    def test_log_softmax(self):
        result, _ = match("log_softmax", unary(lambda x: torch.log_softmax(x, dim=-1), rank=3))
        self.assertFamily(result, "log_softmax")

    def test_elementwise_families_any_rank(self):
        for fn, family, rank in ((torch.relu, "relu", 4), (nn.GELU(), "gelu", 2),
                                 (nn.functional.silu, "silu", 3), (torch.relu, "relu", 1)):
            with self.subTest(family=family, rank=rank):
                result, _ = match(family, unary(fn, rank))
                self.assertFamily(result, family)
                self.assertEqual(result["signature"]["tensors"][0]["shape"], ["rows", "cols"])

    def test_tanh_gelu_is_not_the_erf_family(self):
        for module in (TanhGelu(), nn.GELU(approximate="tanh")):
            result, _ = match("gelu_tanh", unary(module))
            self.assertEqual(result["family"], "")
            self.assertIn("normalized error", result["family_misses"]["gelu"])

    def test_rmsnorm_last_dim_with_eps_and_weight(self):
        make = lambda s: (LastDimRMSNorm(s["b"], eps=1e-4), [torch.randn(s["c"], s["a"], s["b"])])
        result, instances = match("rmsnorm", make)
        self.assertFamily(result, "rmsnorm")
        self.assertEqual(result["signature"]["scalars"],
                         [{"name": "eps", "dtype": "f32", "value": 1e-4}])
        self.assertEqual([t["name"] for t in result["signature"]["tensors"]], ["x", "w", "y"])
        self.assertEqual(result["torch"]["tensors"][1], {"source": "parameter", "name": "weight"})
        self.assertEqual(result["torch"]["workloads"]["gate_0"]["shapes"],
                         [[3, 5, 37], [37], [3, 5, 37]])
        self.assertEqual(result["workloads"][0]["dims"], {"rows": 15, "cols": 37})
        # The module's own parameters are back after testing.
        self.assertTrue(torch.equal(instances[0][1].weight, torch.ones(37)))

    def test_rmsnorm_channels_over_dim1_of_4d(self):
        make = lambda s: (ChannelRMSNorm(), [torch.randn(s["c"], s["d"], s["a"], s["b"])])
        result, _ = match("rmsnorm_channels", make)
        self.assertFamily(result, "rmsnorm_channels")
        self.assertEqual(result["workloads"][0]["dims"], {"n": 3, "c": 7, "s": 5 * 37})
        self.assertEqual(result["signature"]["scalars"][0]["value"], 1e-5)

    def test_layernorm_over_last_three_dims(self):
        make = lambda s: (nn.LayerNorm((s["d"], s["a"], s["b"]), eps=1e-6),
                          [torch.randn(s["c"], s["d"], s["a"], s["b"])])
        result, _ = match("layernorm", make)
        self.assertFamily(result, "layernorm")
        self.assertEqual(result["workloads"][0]["dims"], {"rows": 3, "cols": 7 * 5 * 37})
        self.assertEqual(result["signature"]["scalars"][0]["value"], 1e-6)
        self.assertEqual([t["source"] for t in result["torch"]["tensors"]],
                         ["input", "parameter", "parameter", "output"])
        self.assertEqual(result["torch"]["workloads"]["gate_1"]["shapes"][1], [6, 3, 64])
        self.assertEqual(result["distributions"], ["uniform", "normal", "small"])

    def test_gemv_with_column_vector(self):
        make = lambda s: (Lambda(torch.matmul), [torch.randn(s["a"], s["b"]),
                                                 torch.randn(s["b"], 1)])
        result, _ = match("gemv", make)
        self.assertFamily(result, "gemv")
        self.assertEqual(result["workloads"][1]["dims"], {"rows": 3, "cols": 64})
        self.assertEqual(result["torch"]["workloads"]["gate_0"]["shapes"],
                         [[5, 37], [37, 1], [5, 1]])

    def test_gemv_t(self):
        make = lambda s: (Lambda(lambda a, x: a.T @ x), [torch.randn(s["a"], s["b"]),
                                                         torch.randn(s["a"])])
        result, _ = match("gemv_t", make)
        self.assertFamily(result, "gemv_t")
        self.assertEqual(result["workloads"][0]["dims"], {"rows": 5, "cols": 37})


class NearMissesTest(unittest.TestCase):
    def assertNoFamily(self, result):
        self.assertEqual(result["family"], "", result.get("family_match"))
        self.assertNotIn("family_match", result)

    def test_softmax_over_dim0(self):
        self.assertNoFamily(match("softmax0", unary(lambda x: torch.softmax(x, dim=0)))[0])

    def test_eps_outside_the_sqrt(self):
        make = lambda s: (LastDimRMSNorm(s["b"], eps_inside=False), [torch.randn(s["a"], s["b"])])
        result, _ = match("rms_bad_eps", make)
        self.assertNoFamily(result)
        self.assertIn("differs", result["family_misses"]["rmsnorm"])

    def test_relu6(self):
        self.assertNoFamily(match("relu6", unary(nn.ReLU6()))[0])

    def test_layernorm_without_affine_is_not_layernorm(self):
        make = lambda s: (nn.LayerNorm(s["b"], elementwise_affine=False),
                          [torch.randn(s["a"], s["b"])])
        result, _ = match("ln_plain", make)
        self.assertNoFamily(result)
        self.assertIn("takes 3 input(s)", result["family_misses"]["layernorm"])

    def test_weight_ignored_by_rmsnorm_channels_shape(self):
        # RMSNorm over the last dim *with* a weight is not the weightless channel family.
        make = lambda s: (LastDimRMSNorm(s["b"]), [torch.randn(s["a"], s["b"])])
        result, _ = match("rms", make)
        self.assertEqual(result["family"], "rmsnorm")

    def test_scaled_softmax_and_non_tensor_argument(self):
        self.assertNoFamily(match("scaled", unary(lambda x: torch.softmax(2 * x, dim=-1)))[0])
        make = lambda s: (Lambda(lambda x, k: torch.relu(x) * k), [torch.randn(s["a"]), 2.0])
        result, _ = match("scalar_arg", make)
        self.assertNoFamily(result)
        self.assertIn("not a tensor", result["family_misses"]["relu"])

    def test_derived_is_not_changed(self):
        instances = build_instances(unary(torch.relu), SIZES)
        derived = make_derived("relu", instances)
        before = copy.deepcopy(derived)
        match_family(derived, instances)
        self.assertEqual(derived, before)


class CompareTest(unittest.TestCase):
    """compare's decisions, on the all-finite fast path and on the path that matches non-finite
    values by position."""

    def test_close_finite_values_pass_and_far_ones_fail(self):
        expected = torch.linspace(-2, 2, 1000, dtype=torch.float64)
        self.assertEqual(compare(expected.float(), expected, "f32")[1], "")
        wrong = expected.float().clone()
        wrong[17] += 3e-4  # under the normalized bound, over the element-wise one
        self.assertIn("element 17", compare(wrong, expected, "f32")[1])

    def test_non_finite_values_must_match_by_position(self):
        expected = torch.tensor([1.0, math.nan, math.inf, -math.inf, 2.0], dtype=torch.float64)
        self.assertEqual(compare(expected.float(), expected, "f32"), (0.0, ""))
        for index, value in ((1, 0.0), (2, -math.inf), (0, math.nan), (4, math.inf)):
            actual = expected.float().clone()
            actual[index] = value
            error, why = compare(actual, expected, "f32")
            self.assertEqual(error, math.inf, (index, value))
            self.assertIn("non-finite values", why)


if __name__ == "__main__":
    unittest.main()
