"""Tests of solution.py writing (python/kforge_torch/solution*.py) that build nothing: the
plan of each family's view, the problem's code carried over, the kernel's includes written in,
KernelBench's static checker, and the errors for runs that cannot give a solution. The build
and the numbers: test_solution_build.py (ctest python.solution_build).

Run from the worktree root: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""
import json
import pathlib
import re
import tempfile
import unittest

from kforge_torch.derive import derive
from kforge_torch.families import match_family
from kforge_torch.solution import ExportError, solution_text
from kforge_torch.solution_plan import find_extent, make_plan
from kforge_torch.solution_problem import problem_parts

from tests.solution_fixtures import PROBLEMS, ROOT, fake_run, static_checker

INCLUDES = [ROOT / "include", ROOT / "kernels"]


class SolutionTextTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        base = pathlib.Path(cls.folder.name)
        cls.runs = {name: fake_run(base / name, name + ".py") for name in
                    ("layer_norm_affine", "rms_norm_nchw", "matvec_column", "gelu_erf")}

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def plan(self, name):
        return make_plan(json.loads((self.runs[name] / "reference.torch.json").read_text()))

    def test_layernorm_reads_its_parameters_and_eps_from_the_module(self):
        plan = self.plan("layer_norm_affine")
        self.assertEqual([(t.name, t.source, t.key) for t in plan.tensors],
                         [("x", "input", 0), ("w", "parameter", "ln.weight"),
                          ("b", "parameter", "ln.bias"), ("y", "output", 0)])
        # rows = dim 0 of x, cols = dims 1 and 2 of x (normalized_shape has two dims).
        self.assertEqual(dict(plan.symbols), {"rows": (0, 0, 1), "cols": (0, 1, 3)})
        self.assertEqual([(s.name, s.source, s.key) for s in plan.scalars],
                         [("eps", "attribute", "ln.eps")])

    def test_rmsnorm_channels_views_nchw_as_n_c_s(self):
        plan = self.plan("rms_norm_nchw")
        self.assertEqual(dict(plan.symbols), {"n": (0, 0, 1), "c": (0, 1, 2), "s": (0, 2, 4)})
        self.assertEqual(dict(plan.output_shapes)[0], ((0, 0, 1), (0, 1, 2), (0, 2, 3), (0, 3, 4)))
        self.assertEqual([(s.source, s.key) for s in plan.scalars], [("attribute", "eps")])

    def test_gemv_output_keeps_the_column_layout(self):
        plan = self.plan("matvec_column")
        self.assertEqual(dict(plan.symbols), {"rows": (0, 0, 1), "cols": (0, 1, 2)})
        output = dict(plan.output_shapes)[0]
        self.assertEqual(output[0], (0, 0, 1))  # rows of A
        self.assertIn(output[1], (1, (1, 1, 2)))  # the literal 1 of (M, 1)

    def test_elementwise_flattens_leading_dims(self):
        plan = self.plan("gelu_erf")
        self.assertEqual(dict(plan.symbols), {"rows": (0, 0, 2), "cols": (0, 2, 3)})

    def test_text_is_python_with_every_kforge_include_written_in(self):
        for name, run in self.runs.items():
            with self.subTest(problem=name):
                text = solution_text(run, INCLUDES)
                compile(text, "solution.py", "exec")
                self.assertIn("class ModelNew(nn.Module):", text)
                self.assertNotRegex(text, r"(?m)^\s*#\s*include\s*[<\"](kforge|common|cpu|cuda)/")
                self.assertIn("#include <ATen/dlpack.h>", text)
                self.assertNotIn("def get_inputs", text)
                self.assertRegex(text, r'name="kforge_%s_[0-9a-f]{16}"|name=\'kforge_%s_[0-9a-f]{16}\''
                                 % (name, name))

    def test_constructor_and_forward_signature_come_from_the_problem(self):
        text = solution_text(self.runs["rms_norm_nchw"], INCLUDES)
        self.assertIn("def __init__(self, num_features: int, eps: float = 1e-5):", text)
        self.assertIn("super(ModelNew, self).__init__()", text)
        self.assertIn("def forward(self, x: torch.Tensor):", text)
        self.assertIn("return _kforge_forward(self, (x,))", text)
        self.assertNotIn("torch.mean(x ** 2", text)  # Model.forward is not carried

    def test_the_same_run_gives_the_same_text(self):
        run = self.runs["gelu_erf"]
        self.assertEqual(solution_text(run, INCLUDES), solution_text(run, INCLUDES))

    def test_kernelbench_static_checker_finds_no_error(self):
        checker = static_checker()
        if checker is None:
            self.skipTest("../shared/kernelbench is not here (KernelBench's static checker)")
        for name, run in self.runs.items():
            with self.subTest(problem=name):
                valid, errors, _ = checker.validate_kernel_static(
                    solution_text(run, INCLUDES), backend="cpu", precision="fp32")
                self.assertTrue(valid, errors)

    def test_cuda_kernel_goes_to_cuda_sources_and_passes_the_cuda_checks(self):
        with tempfile.TemporaryDirectory() as folder:
            run = fake_run(pathlib.Path(folder), "matvec_column.py", backend="cuda")
            text = solution_text(run, INCLUDES)
        compile(text, "solution.py", "exec")
        self.assertIn("cuda_sources=[_KFORGE_CUDA_SOURCE_0]", text)
        self.assertIn("-U__CUDA_NO_HALF_OPERATORS__", text)
        self.assertIn("getCurrentCUDAStream", text)
        checker = static_checker()
        if checker is not None:
            valid, errors, _ = checker.validate_kernel_static(text, backend="cuda",
                                                              precision="fp32")
            self.assertTrue(valid, errors)


class SolutionErrorsTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.run = fake_run(pathlib.Path(self.folder.name) / "run", "gelu_erf.py")

    def tearDown(self):
        self.folder.cleanup()

    def assert_refused(self, pattern):
        with self.assertRaisesRegex(ExportError, pattern):
            solution_text(self.run, INCLUDES)

    def test_unfinished_run(self):
        (self.run / "result.json").unlink()
        self.assert_refused(r"result\.json: missing: the run has not finished")

    def test_run_without_best(self):
        (self.run / "result.json").write_text(json.dumps({"best": None}))
        self.assert_refused(r"no best kernel")

    def test_not_a_pytorch_run(self):
        (self.run / "reference.torch.json").unlink()
        self.assert_refused(r"reference\.torch\.json: missing: not a PyTorch problem's run")

    def test_problem_changed_since_the_run(self):
        problem = self.run / "gelu_erf.py"
        problem.write_text(problem.read_text() + "\n# edited\n")
        self.assert_refused(r"gelu_erf\.py: changed since the run")

    def test_unknown_backend(self):
        (self.run / "run.json").write_text(json.dumps({"backend": "tpu"}))
        self.assert_refused(r"backend 'tpu'")


class ModelNewBestTest(unittest.TestCase):
    """A run whose best is a ModelNew module (--language cuda|triton) exports it as it is."""

    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.run = fake_run(pathlib.Path(self.folder.name) / "run", "gelu_erf.py")
        for native in self.run.glob("best.c*"):
            native.unlink()
        self.module = ("# kforge candidate llm-first (generator llm, language cuda)\n"
                       "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")
        (self.run / "best.py").write_text(self.module)
        (self.run / "result.json").write_text(json.dumps({
            "best": {"id": "llm-first", "source": str(self.run / "best.py")}}))

    def tearDown(self):
        self.folder.cleanup()

    def test_the_solution_is_the_module_itself(self):
        self.assertEqual(solution_text(self.run, INCLUDES), self.module)

    def test_a_changed_problem_is_still_refused(self):
        problem = self.run / "gelu_erf.py"
        problem.write_text(problem.read_text() + "\n# edited\n")
        with self.assertRaisesRegex(ExportError, r"gelu_erf\.py: changed since the run"):
            solution_text(self.run, INCLUDES)


class PlanPiecesTest(unittest.TestCase):
    def test_extent_prefers_a_single_dim_then_groups_then_a_constant(self):
        arguments = {0: {"a": [2, 3, 5], "b": [7, 11, 13]}}
        self.assertEqual(find_extent({"a": 3, "b": 11}, arguments, 0, "x"), (0, 1, 2))
        self.assertEqual(find_extent({"a": 15, "b": 143}, arguments, 0, "x"), (0, 1, 3))
        self.assertEqual(find_extent({"a": 1, "b": 1}, arguments, 0, "x"), 1)
        with self.assertRaisesRegex(ValueError, "x: no group of the dims"):
            find_extent({"a": 4, "b": 9}, arguments, 0, "x")

    def test_a_size_only_a_parameter_holds_is_read_from_it(self):
        # linear_gelu (no family: an LLM run's task): out_features is in linear.weight and
        # linear.bias only, and the output's dim 1 is read from the module at each call.
        derived = derive(str(PROBLEMS / "linear_gelu.py"), match_family=match_family)
        plan = make_plan(derived)
        self.assertEqual(dict(plan.output_shapes)[0][1], ("linear.bias", 0, 1))
        self.assertEqual(plan.ranks, ((0, 2),))  # parameters are not forward arguments

    def test_an_output_size_no_dim_gives_is_refused_by_name(self):
        # A pooled convolution's output height is a formula of the input's, not one of its dims,
        # and no family's extent rule gives it.
        derived = derive(str(PROBLEMS / "conv_pool.py"), match_family=match_family)
        self.assertEqual(derived["family"], "")
        with self.assertRaisesRegex(ValueError, "signature symbol .out_d2.: no group of the dims"):
            make_plan(derived)

    def test_problem_without_model_is_refused(self):
        with self.assertRaisesRegex(ValueError, "no top-level `class Model`"):
            problem_parts("import torch\n", "p.py")

    def test_varargs_forward_keeps_its_arguments(self):
        parts = problem_parts(
            "import torch.nn as nn\nclass Model(nn.Module):\n"
            "    def forward(self, a, *rest):\n        return a\n", "p.py")
        self.assertEqual(parts.forward_parameters, "a, *rest")
        self.assertEqual(parts.forward_arguments, "(a, *rest)")

    def test_kernel_sources_hold_no_word_the_static_checker_reads_as_a_bypass(self):
        # KernelBench's checker strips only # and // comments and refuses a whole solution for
        # the word `pass` or a Python-style try/except anywhere else, kernel code included.
        bypass = re.compile(r"\bpass\b|\btry\s*:|\bexcept\s*:|\bexcept\s+\w+")
        for path in sorted((ROOT / "kernels").rglob("*")) + sorted((ROOT / "include").rglob("*")):
            if path.suffix not in (".h", ".cuh", ".cu", ".cpp", ".hpp"):
                continue
            code = "\n".join(line.split("//")[0].split("#")[0]
                             for line in path.read_text().splitlines())
            self.assertIsNone(bypass.search(code), f"{path}: {bypass.search(code)}")


if __name__ == "__main__":
    unittest.main()


class ArchitectureTargetTest(unittest.TestCase):
    """A kernel that declares an architecture-specific nvcc target (a wgmma family variant's
    `cuda_arch = "sm_90a"`) gets it in load_inline's CUDA flags; any other keeps PyTorch's."""

    def test_a_declared_target_is_added_to_the_cuda_flags(self):
        from kforge_torch.solution_source import BUILDS, build_for
        kernel = ("// kforge: nvcc target sm_90a (build with -gencode=arch=compute_90a,code=sm_90a)\n"
                  "// kforge candidate tf32x3_wgmma[BN=128] (family gemm_epilogue, backend cuda)\n")
        build = build_for(kernel, BUILDS["cuda"])
        self.assertEqual(build.extra_cuda_cflags[-1], "-gencode=arch=compute_90a,code=sm_90a")
        self.assertEqual(build.extra_cuda_cflags[:-1], BUILDS["cuda"].extra_cuda_cflags)

    def test_a_kernel_without_one_keeps_the_build(self):
        from kforge_torch.solution_source import BUILDS, build_for
        kernel = "// mentions sm_90a in passing\n__global__ void k() {}\n"
        self.assertIs(build_for(kernel, BUILDS["cuda"]), BUILDS["cuda"])
