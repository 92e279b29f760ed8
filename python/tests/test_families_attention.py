"""match_family on attention problem files written here (python/tests/problems): scaled
dot-product attention through F.scaled_dot_product_attention and written out derives as the
`attention` family; a causal mask or another scale must not.

Run: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""

from __future__ import annotations

import inspect
import pathlib
import unittest

import torch
import torch.nn.functional as F

from kforge_torch.families import match_family
from kforge_torch.problem_module import load_problem
from tests.torch_fixtures import make_derived

PROBLEMS = pathlib.Path(__file__).resolve().parent / "problems"
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")  # torch >= 2.0
HAS_SDPA_SCALE = HAS_SDPA and "scale" in inspect.signature(F.scaled_dot_product_attention).parameters
# Two bindings whose sizes differ, so no two symbols can be confused.
HEADS_BINDINGS = ({"batch": 2, "heads": 3, "seq": 37, "dim": 20},
                  {"batch": 3, "heads": 2, "seq": 24, "dim": 13})
ROWS_BINDINGS = ({"batch": 4, "seq": 29, "dim": 24}, {"batch": 2, "seq": 33, "dim": 7})


def derive(file: str, bindings, **constants):
    """match_family's result for problem `file` built at each binding (plus `constants`)."""
    instances = []
    for i, binding in enumerate(bindings):
        problem = load_problem(PROBLEMS / file, dict(binding, **constants))
        torch.manual_seed(i)
        model = problem.Model(*problem.get_init_inputs())
        instances.append((f"gate_{i}", model, list(problem.get_inputs())))
    return match_family(make_derived(file, instances), instances)


class AttentionMatchTest(unittest.TestCase):
    def assertAttention(self, result):
        self.assertEqual(result["family"], "attention", result["family_misses"])
        self.assertEqual([t["name"] for t in result["signature"]["tensors"]], ["q", "k", "v", "o"])
        self.assertEqual(result["signature"]["scalars"], [])
        self.assertEqual(result["flops"], "4*b*s*s*d + 5*b*s*s")
        self.assertEqual(result["distributions"], ["uniform", "normal"])
        self.assertEqual(result["tolerance"]["rtol"], 1e-3)  # examples/attention's

    @unittest.skipUnless(HAS_SDPA, "torch without F.scaled_dot_product_attention")
    def test_sdpa_over_heads_is_attention(self):
        result = derive("sdpa_heads.py", HEADS_BINDINGS)
        self.assertAttention(result)
        # batch and heads merge into b: [2, 3, 37, 20] is b = 6 rows of [37, 20].
        self.assertEqual(result["workloads"][0]["dims"], {"b": 6, "s": 37, "d": 20})
        self.assertEqual(result["workloads"][1]["dims"], {"b": 6, "s": 24, "d": 13})

    def test_written_out_attention_is_attention(self):
        result = derive("attention_explicit.py", ROWS_BINDINGS, MODE="plain")
        self.assertAttention(result)
        self.assertEqual(result["workloads"][1]["dims"], {"b": 2, "s": 33, "d": 7})

    def test_causal_mask_or_other_scale_is_not(self):
        modes = ["causal", "scale"] + (["sdpa_causal"] if HAS_SDPA else []) + \
            (["sdpa_scale"] if HAS_SDPA_SCALE else [])
        for mode in modes:
            with self.subTest(mode=mode):
                result = derive("attention_explicit.py", ROWS_BINDINGS, MODE=mode)
                self.assertNotEqual(result["family"], "attention")
                self.assertIn("attention", result["family_misses"])


if __name__ == "__main__":
    unittest.main()
