"""family_table.FAMILIES against the example tasks it mirrors (examples/<family>/task.toml), so the
table and the kernels' signatures cannot drift apart."""

from __future__ import annotations

import pathlib
import tomllib
import unittest

from kforge_torch.family_table import FAMILIES, family_by_name

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
DEFAULT_DISTRIBUTIONS = ["uniform", "normal", "heavy_tailed"]  # src/core/task.h


def load(name: str) -> dict:
    with open(EXAMPLES / name / "task.toml", "rb") as f:
        return tomllib.load(f)


class FamilyTableTest(unittest.TestCase):
    # Families whose computation is not fixed but read from each task: gemm_epilogue's
    # element-wise chain (the task's `epilogue`), grouped_conv's and grouped_conv_transpose's
    # geometry (stride, padding, dilation, groups). A fixed entry cannot describe them; a PyTorch
    # problem of their form is matched by reading its module's graph (gemm_match.py,
    # conv_match.py).
    PER_TASK_FORM = ["gemm_epilogue", "grouped_conv", "grouped_conv_transpose"]

    def test_every_cpu_kernel_family_has_an_entry(self):
        kernels = EXAMPLES.parent / "kernels" / "cpu"
        on_disk = sorted(p.name for p in kernels.iterdir() if (p / "family.toml").exists())
        self.assertEqual(sorted([f.name for f in FAMILIES] + self.PER_TASK_FORM), on_disk)

    def test_entries_mirror_the_example_tasks(self):
        for family in FAMILIES:
            with self.subTest(family=family.name):
                task = load(family.name)
                self.assertEqual(task["family"], family.name)
                self.assertEqual([(t["name"], tuple(t["shape"])) for t in task["inputs"]],
                                 [(t.name, t.shape) for t in family.inputs])
                self.assertEqual([(t["name"], tuple(t["shape"])) for t in task["outputs"]],
                                 [(family.output.name, family.output.shape)])
                self.assertEqual([(s["name"], s["dtype"], s["value"])
                                  for s in task.get("scalars", [])],
                                 [(s.name, s.dtype, s.default) for s in family.scalars])
                self.assertEqual(task.get("flops", ""), family.flops)
                self.assertEqual(task.get("bytes", ""), family.bytes)
                self.assertEqual(task.get("distributions", DEFAULT_DISTRIBUTIONS),
                                 list(family.distributions))
                if family.min_rtol:
                    self.assertEqual(task["tolerance"]["rtol"], family.min_rtol)

    def test_dtypes_have_example_tasks(self):
        for family in FAMILIES:
            for dtype in family.dtypes:
                name = family.name if dtype == "f32" else f"{family.name}_{dtype}"
                with self.subTest(example=name):
                    task = load(name)
                    self.assertEqual(task["family"], family.name)
                    self.assertEqual(task["inputs"][0]["dtype"], dtype)

    def test_primary_binds_every_symbol(self):
        for family in FAMILIES:
            bound = set(family.inputs[0].shape)
            self.assertEqual(len(bound), len(family.inputs[0].shape), family.name)
            for template in family.inputs[1:] + (family.output,):
                self.assertLessEqual(set(template.shape), bound, family.name)

    def test_lookup_by_name(self):
        self.assertEqual(family_by_name("gemv_t").name, "gemv_t")
        with self.assertRaises(KeyError):
            family_by_name("conv2d")


if __name__ == "__main__":
    unittest.main()
