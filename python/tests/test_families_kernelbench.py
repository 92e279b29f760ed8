"""match_family on the KernelBench level 1 problems in ../shared/kernelbench/level1 beside the
repository (skipped when absent), each built at two small size bindings, and prints which family
each one matched.

Run: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""

from __future__ import annotations

import ast
import pathlib
import sys
import unittest

import torch

from kforge_torch.families import match_family
from kforge_torch.problem_module import load_problem
from tests.torch_fixtures import make_derived

LEVEL1 = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "kernelbench" / "level1"
LEVEL2 = LEVEL1.parent / "level2"
# Level 2's "a GEMM or convolution, then element-wise ops" (issue 20): served offline.
MUST_MATCH_2 = {"1_Conv2D_ReLU_BiasAdd": "grouped_conv", "12_Gemm_Multiply_LeakyReLU": "gemm_epilogue",
                "40_Matmul_Scaling_ResidualAdd": "gemm_epilogue", "63_Gemm_ReLU_Divide": "gemm_epilogue"}
# Values for the module-level integer constants above 16, in order of appearance; multiples of 4
# so grouped convolutions stay divisible, and different per binding so no two sizes coincide.
# Small: the equivalence test runs each candidate family's float64 reference on CPU, and a 3-D
# transposed convolution at 20-36 per dimension took 50 s a problem (3.4 GFLOP per call).
BINDINGS = ((8, 12, 16, 20, 24), (12, 16, 24, 8, 20))
MUST_MATCH = ("19_ReLU", "23_Softmax", "26_GELU_", "36_RMSNorm_", "40_LayerNorm",
              "4_Matrix_vector_multiplication_",
              "57_conv_transposed_2D__square_input__square_kernel",
              "72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_",
              "73_conv_transposed_3D_asymmetric_input_square_kernel__strided_padded__grouped",
              "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded"
              "____dilated__",
              "82_conv_depthwise_2D_square_input_square_kernel") + \
    (("97_ScaledDotProductAttention",)  # F.scaled_dot_product_attention: torch >= 2.0
     if hasattr(torch.nn.functional, "scaled_dot_product_attention") else ())
MUST_NOT = ("47_Sum_reduction_over_a_dimension", "51_Argmax_over_a_dimension",
            "1_Square_matrix_multiplication_", "88_MinGPTNewGelu", "5_Matrix_scalar_multiplication",
            "33_BatchNorm")


def _constant_int(node: ast.expr):
    """The value of an integer expression of literals only (`256 * 8`), else None."""
    allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)
    if not all(isinstance(n, allowed) for n in ast.walk(node)):
        return None
    value = eval(compile(ast.Expression(node), "<constant>", "eval"), {"__builtins__": {}})
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def load_small(path: pathlib.Path, small: tuple):
    """The problem module with its top-level integer constants > 16 rebound to `small` values
    (cycled), through the loader the derivation and the worker use."""
    tree = ast.parse(path.read_text(), str(path))
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            value = _constant_int(node.value)
            if value is not None and value > 16:
                constants[node.targets[0].id] = small[len(constants) % len(small)]
    return load_problem(path, constants)


def build(path: pathlib.Path):
    instances = []
    for i, small in enumerate(BINDINGS):
        problem = load_small(path, small)
        torch.manual_seed(i)
        model = problem.Model(*problem.get_init_inputs())
        instances.append((f"gate_{i}", model, list(problem.get_inputs())))
    return instances


@unittest.skipUnless(LEVEL1.is_dir(), f"{LEVEL1} is not here")
class KernelBenchLevel1Test(unittest.TestCase):
    def test_level1_problems(self):
        found = matched(LEVEL1)
        for name in MUST_MATCH:
            with self.subTest(problem=name):
                self.assertTrue(found.get(name), f"{name} matched no family")
        for name in MUST_NOT:
            with self.subTest(problem=name):
                self.assertIn(name, found)
                self.assertFalse(found[name], f"{name} matched {found[name]}")

    @unittest.skipUnless(LEVEL2.is_dir(), f"{LEVEL2} is not here")
    def test_level2_problems(self):
        found = matched(LEVEL2)
        for name, family in MUST_MATCH_2.items():
            with self.subTest(problem=name):
                self.assertEqual(found.get(name), family)


def matched(folder: pathlib.Path) -> dict:
    """Problem name -> the family it matched ("" none, None when it could not be built)."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        try:
            instances = build(path)
            derived = make_derived(path.stem, instances)  # runs forward once per instance
        except Exception as error:  # small sizes it does not take, an op this torch lacks
            found[path.stem] = None
            print(f"  {path.stem}: not run ({type(error).__name__}: {error})", file=sys.stderr)
            continue
        result = match_family(derived, instances)
        found[path.stem] = result["family"]
        detail = result["family_match"]["adapter"] if result["family"] else "no family"
        print(f"  {path.stem}: {result['family'] or '-'} [{detail}]", file=sys.stderr)
    return found


if __name__ == "__main__":
    unittest.main()
