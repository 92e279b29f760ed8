"""The reference worker's torch.compile baseline (`time` with "baseline": "compile").

Three layers: the worker subprocess on this machine's PyTorch (PyTorch 1.13 here: the clear
error; PyTorch 2.x on the GPU machine: a real compile), and the worker in-process with
torch.compile replaced by a stand-in whose first call is slow, so that what the worker does with
a compile (once per task and workload, its time kept out of the samples, a failure kept) is
checked on any PyTorch.

Needs libkforge_inputs.so ($KFORGE_INPUTS_LIB or $KFORGE_BIN_DIR); fails without it.
"""

import contextlib
import json
import shutil
import tempfile
import time
import unittest
from unittest import mock

import torch

from kforge_torch import compiled, inputs
from kforge_torch.device import Device
from kforge_torch.worker import Worker
from tests.test_worker import WorkerTestCase, softmax_task, workload

HAS_COMPILE = not compiled.compile_support()
# The stand-in compile's first call sleeps this long: far above any sample of a 8 x 100 softmax.
SLOW_FIRST_CALL_S = 0.3
QUICK_POLICY = {"warmup": 1, "min_repetitions": 3, "max_repetitions": 5,
                "target_relative_noise": 0.0, "max_seconds": 30.0}


def setUpModule():
    inputs.load_library()  # fail, never skip, when the library is absent


class CompileSupportTest(unittest.TestCase):
    def test_says_why_not_exactly_when_torch_compile_is_missing(self):
        why = compiled.compile_support()
        if hasattr(torch, "compile"):
            self.assertNotIn("has no torch.compile", why)
        else:
            self.assertIn("PyTorch %s has no torch.compile" % torch.__version__, why)
            self.assertIn("PyTorch 2.0", why)


class CompileTimeRequestTest(WorkerTestCase):
    """The worker subprocess with this machine's PyTorch."""

    def time_compiled(self, task, handle, name="own"):
        reply = self.worker.request("time", handle=handle, signature=task["signature"],
                                    workload=workload(task, name), seed=3, flush_l2=False,
                                    baseline="compile", policy=QUICK_POLICY)
        self.assertTrue(reply["ok"], reply)
        return reply

    @unittest.skipIf(HAS_COMPILE, "this PyTorch has torch.compile")
    def test_without_torch_compile_the_error_names_the_problem_and_why(self):
        task = softmax_task(self.directory)
        handle = self.load(task)
        for _ in range(2):  # the second request fails at once, the same way
            reply = self.time_compiled(task, handle)
            self.assertEqual(reply["verdict"], "runtime_error")
            self.assertTrue(reply["compile_unsupported"])
            self.assertIn(task["problem"], reply["message"])
            self.assertIn("has no torch.compile", reply["message"])
            self.assertEqual(reply["samples_ms"], [])
        eager = self.worker.request("time", handle=handle, signature=task["signature"],
                                    workload=workload(task, "own"), seed=3, policy=QUICK_POLICY)
        self.assertEqual(eager["verdict"], "ok", eager)  # eager still serves

    @unittest.skipUnless(HAS_COMPILE, "this PyTorch has no usable torch.compile")
    def test_compiles_once_per_task_and_workload_and_times_apart(self):
        task = softmax_task(self.directory)
        handle = self.load(task)
        first = self.time_compiled(task, handle)
        self.assertEqual(first["verdict"], "ok", first)
        self.assertFalse(first["compile_reused"])
        self.assertFalse(first["compile_unsupported"])
        self.assertGreater(first["compile_ms"], 0.0)
        self.assertEqual(len(first["samples_ms"]), 5)
        # A compile takes far longer than a call of a tiny softmax; none is in the samples.
        self.assertLess(max(first["samples_ms"]), first["compile_ms"])
        again = self.time_compiled(task, handle)
        self.assertTrue(again["compile_reused"])
        self.assertEqual(again["compile_ms"], first["compile_ms"])
        other = self.time_compiled(task, handle, "tail")
        self.assertFalse(other["compile_reused"])

    def test_unknown_baseline_is_refused(self):
        task = softmax_task(self.directory)
        reply = self.worker.request("time", handle=self.load(task), signature=task["signature"],
                                    workload=workload(task, "own"), baseline="jit")
        self.assertIs(reply["ok"], False)
        self.assertIn("unknown baseline 'jit' (expected one of eager, compile)", reply["error"])


class StandInCompile:
    """torch.compile's stand-in: returns the module wrapped so that its first call sleeps
    SLOW_FIRST_CALL_S (as a compile would take), or raises when `fails`."""

    def __init__(self, fails=False):
        self.fails = fails
        self.compiled = []

    def __call__(self, model):
        self.compiled.append(model)
        calls = []

        def forward(*args):
            if self.fails:
                raise RuntimeError("inductor could not lower aten.softmax")
            if not calls:
                time.sleep(SLOW_FIRST_CALL_S)
            calls.append(1)
            return model(*args)
        return forward


class CompileInProcessTest(unittest.TestCase):
    """The worker in this process, torch.compile replaced by StandInCompile."""

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="kforge_torch_compile_test_")
        self.worker = Worker(Device("cpu", 0))
        self.request("hello", token="t")
        self.task = softmax_task(self.directory)
        self.handle = self.request("load", path=self.task["path"])["handle"]

    def tearDown(self):
        shutil.rmtree(self.directory)

    def request(self, cmd, **fields):
        fields.update(cmd=cmd, id=1)
        reply = json.loads(self.worker.handle_line(json.dumps(fields)))
        self.assertTrue(reply["ok"], reply)
        return reply

    def time(self, name="own", baseline="compile", **fields):
        return self.request("time", handle=self.handle, signature=self.task["signature"],
                            workload=workload(self.task, name), seed=5, flush_l2=False,
                            baseline=baseline, policy=QUICK_POLICY, **fields)

    def with_compile(self, stand_in):
        """Patches torch.compile with `stand_in` (PyTorch 1.13 has none: created) and makes
        compile_support() say yes, for the `with` block."""
        stack = contextlib.ExitStack()
        stack.enter_context(mock.patch.object(torch, "compile", stand_in, create=True))
        stack.enter_context(mock.patch.object(compiled, "compile_support", return_value=""))
        return stack

    def test_compile_time_is_apart_from_the_samples_and_paid_once(self):
        stand_in = StandInCompile()
        with self.with_compile(stand_in):
            first = self.time()
            again = self.time()
            other = self.time("tail")
        self.assertEqual(first["verdict"], "ok", first)
        self.assertGreaterEqual(first["compile_ms"], SLOW_FIRST_CALL_S * 1e3)
        self.assertFalse(first["compile_reused"])
        self.assertLess(max(first["samples_ms"] + first["warmup_ms"]), SLOW_FIRST_CALL_S * 1e3)
        self.assertLess(first["setup_ms"], SLOW_FIRST_CALL_S * 1e3)
        self.assertEqual(first["stop_reason"], "max_repetitions")  # not cut by max_seconds
        self.assertTrue(again["compile_reused"])
        self.assertEqual(again["compile_ms"], first["compile_ms"])
        self.assertFalse(other["compile_reused"])
        self.assertEqual(len(stand_in.compiled), 2)  # "own" once, "tail" once
        # The compiled module is the baseline's own, not the eager model the task keeps.
        eager = self.time(baseline="eager")
        self.assertEqual(eager["compile_ms"], 0.0)
        self.assertEqual(len(stand_in.compiled), 2)

    def test_a_failed_compile_names_the_problem_and_is_not_retried(self):
        stand_in = StandInCompile(fails=True)
        with self.with_compile(stand_in):
            first = self.time()
            again = self.time()
        for reply in (first, again):
            self.assertEqual(reply["verdict"], "runtime_error")
            self.assertFalse(reply["compile_unsupported"])
            self.assertIn("torch.compile of %s (workload 'own') failed" % self.task["problem"],
                          reply["message"])
            self.assertIn("inductor could not lower aten.softmax", reply["message"])
        self.assertEqual(len(stand_in.compiled), 1)
        self.assertEqual(self.time(baseline="eager")["verdict"], "ok")


if __name__ == "__main__":
    unittest.main()
