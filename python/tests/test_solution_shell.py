"""Tests of the ModelNew shell of Triton candidates (python/kforge_torch/solution_shell.py) and
of the built-in Triton families written into it (kernels/triton/<family>/), as the templates
generator writes them (src/generation/templates_generator.cpp): one marker line, Python that
compiles, KernelBench's static checker (backend triton) content, and a forward that hands the
kernel module the family's signature. Triton itself runs only on the GPU machine: here a torch
`kforge_run` of the family's semantics stands in for the kernel module.

Run from the worktree root: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""
import json
import pathlib
import tempfile
import tomllib
import unittest

import torch

from kforge_torch.derive import derive
from kforge_torch.families import match_family
from kforge_torch.solution_shell import ShellError, shell_text
from kforge_torch.solution_template import KERNEL_MODULE_MARKER

from tests.solution_fixtures import PROBLEMS, ROOT, static_checker

TRITON = ROOT / "kernels" / "triton"

RMS_ROWS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """RMSNorm over the last dim with a learned weight."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


rows = 6
dim = 40


def get_inputs():
    return [torch.randn(rows, dim)]


def get_init_inputs():
    return [dim]
'''

# The family's semantics as a kernel module stand-in: kforge_run on signature-shaped tensors.
STAND_INS = {
    "softmax": "def kforge_run(inputs, outputs, scalars):\n"
               "    outputs[0].copy_(torch.exp(inputs[0] - inputs[0].amax(-1, keepdim=True)) /\n"
               "                     torch.exp(inputs[0] - inputs[0].amax(-1, keepdim=True))"
               ".sum(-1, keepdim=True))\n",
    "rmsnorm_channels": "def kforge_run(inputs, outputs, scalars):\n"
                        "    x = inputs[0]\n"
                        "    outputs[0].copy_(x / torch.sqrt((x * x).mean(1, keepdim=True) + "
                        "scalars[0]))\n",
    "rmsnorm": "def kforge_run(inputs, outputs, scalars):\n"
               "    x, w = inputs\n"
               "    outputs[0].copy_(x / torch.sqrt((x * x).mean(-1, keepdim=True) + scalars[0])"
               " * w)\n",
}


def candidate(shell: str, family: str, variant: dict) -> str:
    """The candidate the templates generator writes for `variant`'s default point."""
    knobs = "".join(f"KF_{name} = {values[0]}\n"
                    for name, values in variant.get("params", {}).items())
    module = (f"# kernels/triton/{family}/{variant['source']} at default\n" + knobs +
              (TRITON / family / variant["source"]).read_text())
    return shell.replace(KERNEL_MODULE_MARKER, module)


class SolutionShellTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        rms = pathlib.Path(cls.folder.name) / "rms_rows.py"
        rms.write_text(RMS_ROWS)
        cls.problems = {"softmax": PROBLEMS / "softmax_rows.py", "rmsnorm": rms,
                        "rmsnorm_channels": PROBLEMS / "rms_norm_eps.py"}
        cls.derived = {f: derive(str(p), match_family=match_family)
                       for f, p in cls.problems.items()}

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def shell(self, family):
        derived = self.derived[family]
        self.assertEqual(derived["family"], family)
        return shell_text(derived, pathlib.Path("reference.torch.json"))

    def test_the_shell_holds_the_marker_once_and_no_load_inline(self):
        for family in self.problems:
            text = self.shell(family)
            self.assertEqual(text.count(KERNEL_MODULE_MARKER), 1)
            self.assertNotIn("load_inline", text)
            self.assertIn("class ModelNew(", text)
            compile(text.replace(KERNEL_MODULE_MARKER, STAND_INS[family]), "shell.py", "exec")

    def test_every_triton_variant_compiles_and_passes_kernelbench_static_checks(self):
        checker = static_checker()
        for family in ("softmax", "rmsnorm", "rmsnorm_channels"):
            spec = tomllib.loads((TRITON / family / "family.toml").read_text())
            self.assertEqual(spec["backend"], "cuda")
            for variant in spec["variants"]:
                text = candidate(self.shell(family), family, variant)
                compile(text, variant["source"], "exec")
                self.assertIn("def kforge_run(", text)
                if checker is None:
                    continue
                valid, errors, _ = checker.validate_kernel_static(text, backend="triton",
                                                                  precision="fp32")
                self.assertTrue(valid, f"{family}/{variant['name']}: {errors}")
        relu = tomllib.loads((TRITON / "relu" / "family.toml").read_text())
        for variant in relu["variants"]:
            compile((TRITON / "relu" / variant["source"]).read_text(), variant["source"], "exec")

    def test_forward_hands_the_kernel_module_the_family_signature(self):
        for family, problem in self.problems.items():
            namespace = {"__name__": "kforge_candidate"}
            exec(compile(self.shell(family).replace(KERNEL_MODULE_MARKER, STAND_INS[family]),
                         "shell.py", "exec"), namespace)
            problem_namespace = {"__name__": "kforge_problem"}
            exec(compile(problem.read_text(), str(problem), "exec"), problem_namespace)
            torch.manual_seed(3)
            model = problem_namespace["Model"](*problem_namespace["get_init_inputs"]())
            torch.manual_seed(3)
            model_new = namespace["ModelNew"](*problem_namespace["get_init_inputs"]())
            inputs = problem_namespace["get_inputs"]()
            torch.testing.assert_close(model_new(*inputs), model(*inputs))

    def test_a_task_without_a_family_or_with_a_changed_problem_is_refused(self):
        derived = dict(self.derived["softmax"], family="")
        with self.assertRaisesRegex(ShellError, "no built-in family"):
            shell_text(derived, pathlib.Path("t.json"))
        derived = dict(self.derived["softmax"], problem_sha256="0" * 64)
        with self.assertRaisesRegex(ShellError, "changed since the task was derived"):
            shell_text(derived, pathlib.Path("t.json"))


if __name__ == "__main__":
    unittest.main()
