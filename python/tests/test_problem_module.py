"""kforge_torch.problem_module: a problem file loaded with constants rebound."""

import os
import tempfile
import unittest

from kforge_torch.problem_module import load_problem

PROBLEMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "problems")

SOURCE = """
batch_size = 4
num_classes = 3
a = b = 7
dim: int = 5
input_shape = (num_classes,)
calls = []
def get_shape():
    calls.append(1)
    return (batch_size, *input_shape)
"""


class LoadProblemTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.directory.name, "42_Some_Problem.py")
        with open(self.path, "w") as f:
            f.write(SOURCE)

    def tearDown(self):
        self.directory.cleanup()

    def test_as_written(self):
        module = load_problem(self.path, {})
        self.assertEqual(module.__name__, "42_Some_Problem")
        self.assertEqual(module.__file__, self.path)
        self.assertEqual(module.get_shape(), (4, 3))

    def test_derived_constants_follow(self):
        module = load_problem(self.path, {"batch_size": 2, "num_classes": 9})
        self.assertEqual(module.input_shape, (9,))
        self.assertEqual(module.get_shape(), (2, 9))

    def test_chained_and_annotated_assignments(self):
        # A list value (JSON has no tuples) is written as a tuple, as problem files write shapes.
        module = load_problem(self.path, {"a": 1, "dim": [1, 2]})
        self.assertEqual((module.a, module.b, module.dim), (1, 7, (1, 2)))

    def test_each_load_is_a_fresh_module(self):
        first = load_problem(self.path, {})
        first.get_shape()
        self.assertEqual(load_problem(self.path, {}).calls, [])

    def test_unknown_constant_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "no top-level assignment of missing_name"):
            load_problem(self.path, {"missing_name": 3})

    def test_a_test_problem_loads(self):
        module = load_problem(os.path.join(PROBLEMS, "linear_gelu.py"), {"in_features": 6})
        self.assertEqual(module.input_shape, (6,))
        self.assertEqual(module.get_init_inputs(), [6, 16])


if __name__ == "__main__":
    unittest.main()
