"""A run for profiling (RunRequest.nvtx_range, sent by kforge's NcuProfiler): the candidate
worker opens the NVTX range around the last call's forward only, so that ncu counts the kernels
forward launches and none of the harness's (input generation and copies, parameter copies).

Runs on CPU torch: the NVTX entry points are replaced by recorders (before the worker takes its
tamper snapshot, as the real ones are held before any candidate is imported). The profiling
itself, under ncu on a GPU, is GpuModelNewProfile (tests/model_new_profile_test.cpp).

Needs libkforge_inputs.so ($KFORGE_INPUTS_LIB or $KFORGE_BIN_DIR); fails without it.
"""

import os
import shutil
import tempfile
import unittest
import unittest.mock

from kforge_torch import candidate_run, inputs
from kforge_torch.candidate_worker import CandidateWorker
from kforge_torch.device import Device
from kforge_torch.protocol import ProtocolError
from tests.candidate_harness import CandidateWorkerProcess
from tests.test_candidate_corpus import CORPUS, corpus_task
from tests.test_worker import workload

RANGE = "kforge_profiled_forward"

RAISES = '''
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        raise ValueError("no")
'''


def setUpModule():
    inputs.load_library()  # fail, never skip, when the library is absent


class ProfiledRunTest(unittest.TestCase):
    """The order of events in one profiled run, recorded in-process."""

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="kforge_candidate_profile_test_")
        self.addCleanup(shutil.rmtree, self.directory, True)
        self.task = corpus_task(self.directory)
        self.log = []
        real_copy = candidate_run.fresh_copy

        def copy(source):
            self.log.append("copy")
            return real_copy(source)

        # Replaced before the worker (and its TamperWatch) exists, as the real ones are held
        # before a candidate is imported.
        for name, value in (("nvtx_available", lambda: True),
                            ("nvtx_range_push", lambda name: self.log.append("push " + name)),
                            ("nvtx_range_pop", lambda: self.log.append("pop")),
                            ("fresh_copy", copy)):
            patcher = unittest.mock.patch.object(candidate_run, name, value)
            patcher.start()
            self.addCleanup(patcher.stop)
        self.worker = CandidateWorker(Device("cpu", 0))

    def run_profiled(self, source, calls, **fields):
        loaded = self.worker.dispatch("load", {"path": source, "task_path": self.task["path"]})
        self.assertEqual(loaded["verdict"], "ok", loaded)
        handle = loaded["handle"]
        session = self.worker._session(handle)
        candidate = session.candidate
        build, generate = candidate.build, candidate.task.generate_inputs

        def logged_build(*args, **kwargs):
            model = build(*args, **kwargs)
            model.register_forward_pre_hook(lambda module, args: self.log.append("forward"))
            return model

        def logged_generate(*args, **kwargs):
            self.log.append("inputs")
            return generate(*args, **kwargs)

        candidate.build = logged_build
        candidate.task.generate_inputs = logged_generate
        output = os.path.join(self.directory, "out.bin")
        open(output, "wb").close()
        request = dict(handle=handle, signature=self.task["signature"],
                       workload=workload(self.task, "small"), seed=1, calls=calls,
                       output_path=output, late_write_wait_ms=0.0, host_inputs=True, **fields)
        return self.worker.dispatch("run", request)

    def test_only_the_last_calls_forward_is_in_the_range(self):
        reply = self.run_profiled(os.path.join(CORPUS, "candidates", "honest_torch.py"), 2,
                                  nvtx_range=RANGE)
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual(self.log.count("push " + RANGE), 1, self.log)
        self.assertEqual(self.log.count("pop"), 1, self.log)
        push, pop = self.log.index("push " + RANGE), self.log.index("pop")
        # Inside: forward and nothing else; the warm-up call, the inputs and every copy outside.
        self.assertEqual(self.log[push + 1:pop], ["forward"], self.log)
        self.assertEqual(self.log.count("forward"), 2, self.log)
        self.assertLess(self.log.index("forward"), push, self.log)
        self.assertLess(self.log.index("inputs"), push, self.log)
        self.assertIn("copy", self.log[:push])
        self.assertNotIn("copy", self.log[push:])  # the last call's copies came before the push

    def test_one_call_is_profiled_itself_and_no_range_without_the_field(self):
        reply = self.run_profiled(os.path.join(CORPUS, "candidates", "honest_torch.py"), 1,
                                  nvtx_range=RANGE)
        self.assertEqual(reply["verdict"], "ok", reply)
        push = self.log.index("push " + RANGE)
        self.assertEqual(self.log[push + 1:], ["forward", "pop"], self.log)
        self.log.clear()
        reply = self.run_profiled(os.path.join(CORPUS, "candidates", "honest_torch.py"), 2)
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual([e for e in self.log if e.startswith(("push", "pop"))], [], self.log)

    def test_a_forward_that_raises_still_closes_the_range(self):
        source = os.path.join(self.directory, "raises.py")
        with open(source, "w") as f:
            f.write(RAISES)
        reply = self.run_profiled(source, 1, nvtx_range=RANGE)
        self.assertEqual(reply["verdict"], "runtime_error", reply)
        self.assertEqual([e for e in self.log if e.startswith(("push", "pop"))],
                         ["push " + RANGE, "pop"], self.log)

    def test_a_candidate_that_replaces_the_range_is_rejected(self):
        source = os.path.join(self.directory, "escapes.py")
        with open(source, "w") as f:
            f.write("import kforge_torch.candidate_run as run\n"
                    "run.nvtx_range_push = lambda name: None\n" + RAISES)
        loaded = self.worker.dispatch("load", {"path": source, "task_path": self.task["path"]})
        self.assertEqual(loaded["verdict"], "rejected_by_policy", loaded)
        self.assertIn("nvtx_range_push was replaced", loaded["message"])

    def test_a_pytorch_without_nvtx_refuses_the_request(self):
        with unittest.mock.patch.object(candidate_run, "nvtx_available", lambda: False):
            self.worker = CandidateWorker(Device("cpu", 0))  # its snapshot with the patch
            with self.assertRaisesRegex(ProtocolError, "no NVTX"):
                self.run_profiled(os.path.join(CORPUS, "candidates", "honest_torch.py"), 1,
                                  nvtx_range=RANGE)
        self.assertNotIn("forward", self.log)


class ProfiledRunInTheWorkerProcessTest(unittest.TestCase):
    """The field as it travels: refused with a reason by a CPU-only PyTorch, served by a CUDA
    build (no ncu attached: the range costs nothing)."""

    def test_the_field_is_served_or_refused_saying_why(self):
        directory = tempfile.mkdtemp(prefix="kforge_candidate_profile_test_")
        self.addCleanup(shutil.rmtree, directory, True)
        task = corpus_task(directory)
        worker = CandidateWorkerProcess()
        self.addCleanup(worker.close)
        worker.request("hello", measure=False)
        loaded = worker.request("load", path=os.path.join(CORPUS, "candidates", "honest_torch.py"),
                                task_path=task["path"])
        self.assertEqual(loaded["verdict"], "ok", loaded)
        output = os.path.join(directory, "out.bin")
        open(output, "wb").close()
        reply = worker.request("run", handle=loaded["handle"], signature=task["signature"],
                               workload=workload(task, "small"), seed=1, calls=2,
                               output_path=output, host_inputs=True, nvtx_range=RANGE)
        if candidate_run.nvtx_available():
            self.assertEqual(reply.get("verdict"), "ok", reply)
        else:
            self.assertFalse(reply["ok"], reply)
            self.assertIn("no NVTX", reply["error"])
            self.assertFalse(worker.exited)  # a harness error: the worker keeps serving


if __name__ == "__main__":
    unittest.main()
