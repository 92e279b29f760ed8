"""End to end: `kforge optimize PROBLEM.py --backend cpu` writes solution.py, `kforge export`
writes the same, and the solution, built by load_inline, is a drop-in ModelNew: same
state_dict and parameter order as Model, same random parameters from the same seed, outputs
within the task's tolerance of Model's (in float64) and of KernelBench's fp32 check, at the
problem's size and at another, for a family with parameters (layernorm), one with a scalar read
from the module and a layout view (rmsnorm_channels over NCHW), gemv with x of (K, 1) and an
element-wise family. One build per problem, shared by every check of it.

Slow (4 short runs and 4 builds, ~20-60 s each on 2 cores): skipped unless KFORGE_SOLUTION_BUILD=1
and KFORGE_CLI names the kforge binary (ctest python.solution_build, label `slow`, sets both).
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

import torch

from tests.solution_fixtures import PROBLEMS, static_checker

CLI = os.environ.get("KFORGE_CLI", "")
ENABLED = os.environ.get("KFORGE_SOLUTION_BUILD") == "1" and pathlib.Path(CLI).is_file()
NAMES = ("layer_norm_affine", "rms_norm_nchw", "matvec_column", "gelu_erf")
SEEDS = (0, 1, 2)


def load_module(path: pathlib.Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@unittest.skipUnless(ENABLED, "slow: set KFORGE_SOLUTION_BUILD=1 and KFORGE_CLI=<kforge binary> "
                              "(ctest -L slow)")
class SolutionBuildTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory(prefix="kforge_solution_build_")
        base = pathlib.Path(cls.folder.name)
        os.environ["TORCH_EXTENSIONS_DIR"] = str(base / "torch_extensions")
        cls.runs, cls.solutions, cls.problems, cls.tasks = {}, {}, {}, {}
        for name in NAMES:
            run = base / name
            cls.optimize(PROBLEMS / f"{name}.py", run, base)
            cls.runs[name] = run
            cls.tasks[name] = json.loads((run / "reference.torch.json").read_text())
            cls.problems[name] = load_module(run / f"{name}.py", f"problem_{name}")
            cls.solutions[name] = load_module(run / "solution.py", f"solution_{name}")

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    @classmethod
    def optimize(cls, problem, run, base):
        done = subprocess.run(
            [CLI, "optimize", str(problem), "--backend", "cpu", "--steps", "0",
             "--max-candidates", "1", "--final-rounds", "2", "--run-dir", str(run),
             "--memory", str(base / "memory.sqlite"), "--cache-dir", str(base / "cache")],
            capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise AssertionError(f"kforge optimize {problem.name} exited {done.returncode}:\n"
                                 f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        if "solution:" not in done.stdout:
            raise AssertionError(f"the summary names no solution.py:\n{done.stdout[-2000:]}")

    def pair(self, name, *init):
        """(Model, ModelNew) built from the same seed with `init` (default get_init_inputs())."""
        problem = self.problems[name]
        init = init or tuple(problem.get_init_inputs())
        torch.manual_seed(7)
        model = problem.Model(*init)
        torch.manual_seed(7)
        new = self.solutions[name].ModelNew(*init)
        return model, new

    def assert_close(self, name, model, new, inputs, atol):
        task = self.tasks[name]
        rtol = task["tolerance"]["rtol"]
        with torch.no_grad():
            expected = model.double()(*[x.double() for x in inputs])
            model.float()
            fp32 = model(*inputs)
            actual = new(*inputs)
        self.assertEqual(actual.shape, fp32.shape)
        self.assertEqual(actual.dtype, fp32.dtype)
        excess = (actual.double() - expected).abs() - (atol + rtol * expected.abs())
        self.assertLessEqual(excess.max().item(), 0.0, f"{name}: beyond the task's tolerance")
        # KernelBench's own fp32 check (eval.py: atol = rtol = 1e-4 against Model in fp32).
        self.assertTrue(torch.allclose(fp32, actual, atol=1e-4, rtol=1e-4),
                        f"{name}: max difference {(fp32 - actual).abs().max().item()}")

    def test_export_writes_what_optimize_wrote(self):
        run = self.runs["gelu_erf"]
        exported = run / "exported.py"
        done = subprocess.run([CLI, "export", str(run), "--format", "kernelbench", "-o",
                               str(exported)], capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), str(exported))
        self.assertEqual(exported.read_text(), (run / "solution.py").read_text())

    def test_state_dict_and_parameters_match_model(self):
        for name in NAMES:
            with self.subTest(problem=name):
                model, new = self.pair(name)
                self.assertEqual(list(model.state_dict()), list(new.state_dict()))
                for (a, p), (b, q) in zip(model.named_parameters(), new.named_parameters()):
                    self.assertEqual((a, p.shape), (b, q.shape))
                    self.assertTrue(torch.equal(p, q), f"{name}: {a} differs from Model's")
                new.load_state_dict(model.state_dict())  # a user's weights load unchanged

    def test_outputs_match_model_at_the_problem_size(self):
        for name in NAMES:
            task = self.tasks[name]
            atol = task["tolerance"].get("workload_atol", {}).get("problem",
                                                                   task["tolerance"]["atol"])
            model, new = self.pair(name)
            with torch.no_grad():  # random affine parameters: a wrong mapping of w or b shows
                for p in model.parameters():
                    p.copy_(torch.randn_like(p))
            new.load_state_dict(model.state_dict())
            for seed in SEEDS:
                with self.subTest(problem=name, seed=seed):
                    torch.manual_seed(seed)
                    self.assert_close(name, model, new, self.problems[name].get_inputs(), atol)

    def test_outputs_match_model_at_another_size(self):
        shapes = {"layer_norm_affine": [(3, 24, 40)], "rms_norm_nchw": [(2, 16, 7, 9)],
                  "matvec_column": [(37, 300), (300, 1)], "gelu_erf": [(2, 5, 4097)]}
        for name in NAMES:
            with self.subTest(problem=name):
                model, new = self.pair(name)
                torch.manual_seed(3)
                inputs = [torch.rand(shape) * 2 - 1 for shape in shapes[name]]
                self.assert_close(name, model, new, inputs, self.tasks[name]["tolerance"]["atol"])

    def test_eps_is_read_from_the_module(self):
        model, new = self.pair("rms_norm_nchw", 16, 1e-2)
        torch.manual_seed(4)
        small = [torch.rand(2, 16, 5, 6) * 1e-3]  # eps dominates the mean of squares
        self.assert_close("rms_norm_nchw", model, new, small, 1e-6)

    def test_wrong_input_rank_is_refused_by_name(self):
        _, new = self.pair("gelu_erf")
        with self.assertRaisesRegex(ValueError, "forward argument 0 must be a tensor of rank 3"):
            new(torch.rand(4, 5))

    def test_kernelbench_static_checker_accepts_the_files(self):
        checker = static_checker()
        if checker is None:
            self.skipTest("../shared/kernelbench is not here (KernelBench's static checker)")
        for name in NAMES:
            with self.subTest(problem=name):
                text = (self.runs[name] / "solution.py").read_text()
                valid, errors, _ = checker.validate_kernel_static(text, backend="cpu",
                                                                  precision="fp32")
                self.assertTrue(valid, errors)


if __name__ == "__main__":
    sys.exit(unittest.main())
