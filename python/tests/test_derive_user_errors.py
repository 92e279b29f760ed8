"""How a derivation reports the mistakes users make in a problem file's own functions (not in
forward): each message names the call that went wrong and what was expected. And a derivation
started with --end-at-stdin-eof ends when its caller does, even inside an endless forward.

Run: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile
import time
import unittest

from kforge_torch.derive import derive
from kforge_torch.problem_run import DeriveError
from tests.test_derive import ROOT, stand_in_generate

# A valid problem: each test replaces one part of it.
BASE = {
    "init": "    def __init__(self):\n        super().__init__()\n",
    "forward": "    def forward(self, x):\n        return x * 2\n",
    "get_inputs": "def get_inputs():\n    return [torch.randn(N, N)]\n",
    "get_init_inputs": "def get_init_inputs():\n    return []\n",
    "tail": "",
}


def problem_source(**parts):
    chosen = dict(BASE, **parts)
    return ("import torch\nimport torch.nn as nn\n\nN = 64\n\n\nclass Model(nn.Module):\n"
            + chosen["init"] + chosen["forward"] + "\n\n" + chosen["get_inputs"] + "\n\n"
            + chosen["get_init_inputs"] + "\n" + chosen["tail"])


class ProblemFunctionErrorTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.addCleanup(self.folder.cleanup)

    def error_of(self, **parts):
        path = pathlib.Path(self.folder.name) / "user_problem.py"
        path.write_text(problem_source(**parts))
        with self.assertRaises(DeriveError) as caught:
            derive(path, {"generate": stand_in_generate})
        message = str(caught.exception)
        self.assertTrue(message.startswith(f"{path}: "), message)
        return message

    def test_the_base_problem_derives(self):
        path = pathlib.Path(self.folder.name) / "fine.py"
        path.write_text(problem_source())
        self.assertEqual(derive(path, {"generate": stand_in_generate})["name"], "fine")

    def test_a_constructor_missing_arguments_is_the_constructors_fault_not_forwards(self):
        message = self.error_of(init="    def __init__(self, features, scale):\n"
                                     "        super().__init__()\n")
        self.assertIn("Model(*get_init_inputs()) with 0 argument(s) raised TypeError", message)
        self.assertNotIn("forward raised", message)

    def test_get_init_inputs_raising_is_named(self):
        message = self.error_of(get_init_inputs="def get_init_inputs():\n"
                                                "    raise ValueError('no weights file')\n")
        self.assertIn("get_init_inputs() raised ValueError: no weights file", message)

    def test_get_inputs_returning_a_tensor_instead_of_a_list(self):
        message = self.error_of(get_inputs="def get_inputs():\n    return torch.randn(N, N)\n")
        self.assertIn("get_inputs() returned a Tensor; expected a list of forward's arguments",
                      message)

    def test_get_inputs_returning_a_dict(self):
        message = self.error_of(get_inputs="def get_inputs():\n"
                                           "    return {'x': torch.randn(N, N)}\n")
        self.assertIn("get_inputs() returned a dict; expected a list", message)

    def test_a_string_argument_is_refused_by_position(self):
        message = self.error_of(get_inputs="def get_inputs():\n    return ['hello']\n")
        self.assertIn("get_inputs() element 0 is a str; expected a tensor or a number", message)

    def test_get_inputs_raising_is_named(self):
        message = self.error_of(get_inputs="def get_inputs():\n    return [undefined_name]\n")
        self.assertIn("get_inputs() raised NameError", message)
        self.assertNotIn("forward raised", message)

    def test_forward_raising_is_still_forwards(self):
        message = self.error_of(forward="    def forward(self, x):\n"
                                        "        raise RuntimeError('boom')\n")
        self.assertIn("forward raised RuntimeError: boom", message)

    def test_sys_exit_at_import_is_an_error_saying_so(self):
        message = self.error_of(tail="import sys\nsys.exit(0)\n")
        self.assertIn("the module called sys.exit(0) while it was imported", message)


FOREVER = problem_source(forward="    def forward(self, x):\n        while True:\n"
                                 "            pass\n")


class EndAtStdinEofTest(unittest.TestCase):
    def run_derive(self, *flags):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        path = pathlib.Path(folder.name) / "forever.py"
        path.write_text(FOREVER)
        environment = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        child = subprocess.Popen(
            [sys.executable, "-m", "kforge_torch", "derive", *flags, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=environment, text=True)
        self.addCleanup(self.end, child)
        return child

    @staticmethod
    def end(child):
        child.kill()
        child.wait()
        for pipe in (child.stdin, child.stdout, child.stderr):
            if not pipe.closed:
                pipe.close()

    def in_endless_forward(self):
        """A derivation with --end-at-stdin-eof, left running until it is inside forward."""
        child = self.run_derive("--end-at-stdin-eof")
        time.sleep(3.0)  # torch imported, the module loaded: inside forward's loop by now
        self.assertIsNone(child.poll(), "the endless forward ended by itself")
        return child

    def test_an_endless_forward_ends_once_the_callers_pipe_closes(self):
        child = self.in_endless_forward()
        start = time.monotonic()
        child.stdin.close()  # what the kernel does when kforge dies
        code = child.wait(timeout=30)
        self.assertLess(time.monotonic() - start, 10.0)
        self.assertEqual(code, 1)
        self.assertIn("stdin closed", child.stderr.read())

    def test_it_ends_when_the_caller_is_gone_with_its_stderr_too(self):
        child = self.in_endless_forward()
        child.stderr.close()  # a dead caller: the message cannot be written (BrokenPipeError)
        child.stdout.close()
        child.stdin.close()
        self.assertEqual(child.wait(timeout=10), 1)

    def test_a_batch_refuses_the_flag(self):
        child = self.run_derive("--batch", "--end-at-stdin-eof")
        _, stderr = child.communicate(timeout=60)
        self.assertEqual(child.returncode, 2)
        self.assertIn("--end-at-stdin-eof takes one file", stderr)


if __name__ == "__main__":
    unittest.main()
